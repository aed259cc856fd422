// strata-chaos: a training-like loop on N ranks in two emulated regions while a driver
// kills random ranks (SIGKILL, or SIGSTOP that only the heartbeat can find) and starts
// replacements that join, and with --partition-every also cuts the link between the
// regions (each then in a network namespace of its own) for longer than the heartbeat.
// Checks that every completed step's result is the exact sum over the ranks that took
// part, that replicas' models stay identical (share_state's hash after every change of
// members), that never two sides of a partition go on (a step completed by a world older
// than one that has completed a step means two ran at once), and that the loop keeps
// making progress.
//
//   strata-chaos --ranks 4 --seconds 600               # the benchmark (BENCHMARKS.md)
//   strata-chaos --ranks 4 --seconds 40 --kill-every 8 # the bounded CI run
//   strata-chaos --ranks 4 --seconds 600 --partition-every 1   # kills and partitions in turn (root)
//
// Each worker has an id for life; its data for step s is f(s, id), integers small enough
// that every sum is exact in f64, so "exact" means bitwise. The step loop:
//   allreduce(data ++ [pending joiners, stop]) -> check -> model += result -> step++
// Rank 0 fills the tail from the store and the driver, so every rank learns at the same
// step boundary that it must grow (grow + share_state to the joiners) or stop. On
// PeerLostError the survivors shrink, rewind to the step every one of them reached, and
// check their models agree. The side of a partition that may not go on (QuorumLostError:
// the other side holds the arbiter, the store in region east, or more ranks) waits for
// the link and rejoins through a ticket, as a replacement does.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bootstrap/tcp_store.hpp"
#include "netns.hpp"
#include "strata/strata.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using strata::Communicator;

constexpr std::size_t kLen = 1 << 17;  // doubles per step: 1 MiB

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// Shared by the driver and every worker (MAP_SHARED before fork).
struct Board {
  std::atomic<std::int64_t> steps{0};         // steps completed (counted by each world's rank 0)
  std::atomic<std::int64_t> last_step_ns{0};  // when any rank last completed a step
  std::atomic<std::int64_t> wrong{0};         // results that were not the exact sum
  std::atomic<std::int64_t> world{0};         // size of the latest world formed
  std::atomic<std::int64_t> formed_ns{0};
  std::atomic<std::int64_t> stop{0};
  std::atomic<std::int64_t> cut{0};           // the link between the regions is cut
  std::atomic<std::int64_t> first_step_ns{0};  // the newest world's first completed step
  std::atomic<std::int64_t> newest_world{0};  // formation time of the newest world that completed a step
  std::atomic<std::int64_t> two_sides{0};     // steps completed by a world older than that
  char first_wrong[512]{};
};

double value(std::int64_t step, int id, std::size_t i) {
  return static_cast<double>((static_cast<std::uint64_t>(step) * 2654435761u + static_cast<std::uint64_t>(id) * 40503u + i * 97u) % 100003u);
}

struct Worker {
  Board* board;
  std::shared_ptr<strata::Store> store;
  int id;
  strata::CommOptions opts;
  std::optional<Communicator> comm;
  std::vector<int> members;  // ids, by rank
  std::int64_t world_ns = 0;  // when this world formed, by its rank 0's clock: its name
  bool stepped = false;       // this world has completed a step
  std::vector<double> model = std::vector<double>(kLen, 0.0), model_prev = std::vector<double>(kLen, 0.0);
  // step, grows done, joiners absorbed: the same on every member
  std::int64_t progress[3] = {0, 0, 0};

  std::int64_t& step() { return progress[0]; }
  std::int64_t& grows() { return progress[1]; }
  std::int64_t& absorbed() { return progress[2]; }

  void formed() {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(comm->size()));
    const std::int64_t mine = id;
    comm->allgather(&mine, ids.data(), 1, strata::DataType::i64).wait();
    members.assign(ids.begin(), ids.end());
    // Replicas must hold the same model and counters; joiners get them here.
    const std::span<std::byte> state[] = {std::as_writable_bytes(std::span(model)),
                                          std::as_writable_bytes(std::span(progress))};
    comm->share_state(state, 0);
    world_ns = comm->rank() == 0 ? now_ns() : 0;
    comm->allreduce(&world_ns, &world_ns, 1, strata::DataType::i64, strata::ReduceOp::max).wait();
    stepped = false;
    if (std::getenv("CHAOS_DEBUG") && comm->rank() == 0) {
      std::string ids;
      for (int m : members) ids += " " + std::to_string(m);
      std::fprintf(stderr, "world %lld formed: ids%s, step %lld\n", static_cast<long long>(world_ns), ids.c_str(),
                   static_cast<long long>(step()));
    }
    board->world.store(comm->size());
    board->formed_ns.store(now_ns());
  }

  void one_step() {
    std::vector<double> buf(kLen + 2);
    for (std::size_t i = 0; i < kLen; ++i) buf[i] = value(step(), id, i);
    if (comm->rank() == 0) {
      buf[kLen] = static_cast<double>(store->add("join/requests", 0) - absorbed());
      buf[kLen + 1] = static_cast<double>(board->stop.load());
    }
    comm->allreduce(buf.data(), buf.data(), buf.size(), strata::DataType::f64, strata::ReduceOp::sum).wait();
    for (std::size_t i = 0; i < kLen; ++i) {
      double want = 0;
      for (int m : members) want += value(step(), m, i);
      if (buf[i] != want && board->wrong.fetch_add(1) == 0)
        std::snprintf(board->first_wrong, sizeof board->first_wrong, "step %lld element %zu: %.1f, expected %.1f",
                      static_cast<long long>(step()), i, buf[i], want);
    }
    model_prev = model;
    for (std::size_t i = 0; i < kLen; ++i) model[i] += buf[i];
    ++step();
    if (comm->rank() == 0) {
      board->steps.fetch_add(1);
      // Worlds follow one another: once a newer one has completed a step, an older one
      // that completes one is a second side still running.
      std::int64_t newest = board->newest_world.load();
      while (world_ns > newest && !board->newest_world.compare_exchange_weak(newest, world_ns)) {
      }
      if (world_ns < board->newest_world.load()) {
        board->two_sides.fetch_add(1);
        if (std::getenv("CHAOS_DEBUG"))
          std::fprintf(stderr, "world %lld (id %d rank 0) completed step %lld after world %lld\n",
                       static_cast<long long>(world_ns), id, static_cast<long long>(step()),
                       static_cast<long long>(board->newest_world.load()));
      }
      if (!stepped) board->first_step_ns.store(now_ns());
      stepped = true;
    }
    board->last_step_ns.store(now_ns());
    // Joiners first: one that was promised a place must get it before everyone stops.
    if (const auto pending = static_cast<int>(buf[kLen]); pending > 0) grow(pending);
    if (buf[kLen + 1] != 0) throw std::runtime_error("stop");
  }

  void grow(int pending) {
    const int new_size = comm->size() + pending;
    const std::string gen = "grow-" + std::to_string(grows());
    if (comm->rank() == 0)
      for (int t = 0; t < pending; ++t)
        store->set("join/ticket/" + std::to_string(absorbed() + t), std::to_string(grows()) + " " + std::to_string(new_size));
    Communicator bigger = comm->grow(store, new_size, gen, opts);
    absorbed() += pending;
    ++grows();
    comm.emplace(std::move(bigger));
    formed();
  }

  // After a loss: the survivors' world. False where this rank is on a side of a partition
  // that must not go on. While a partition's other side is still being found, survivors
  // may hold different lists: everyone's shrink fails, and all try again once the losses
  // stop changing.
  bool recover(std::vector<int> lost) {
    for (int attempt = 0;; ++attempt) {
      try {
        shrink_to(lost);
        return true;
      } catch (const strata::QuorumLostError&) {
        return false;
      } catch (const strata::Error& e) {
        if (attempt >= 3 || (e.code() != strata::ErrorCode::peer_lost && e.code() != strata::ErrorCode::mismatch)) throw;
        lost = settled_losses();
      }
    }
  }

  std::vector<int> settled_losses() {
    auto lost = comm->lost_ranks();
    for (auto stable = Clock::now(); Clock::now() - stable < 1500ms; std::this_thread::sleep_for(50ms))
      if (auto now = comm->lost_ranks(); now != lost) {
        lost = now;
        stable = Clock::now();
      }
    return lost;
  }

  void shrink_to(const std::vector<int>& lost) {
    Communicator smaller = comm->shrink(lost, opts);
    // A rank may have finished the step the loss interrupted while others had not: all
    // go back to the step every survivor reached.
    std::int64_t agreed = step();
    smaller.allreduce(&agreed, &agreed, 1, strata::DataType::i64, strata::ReduceOp::min).wait();
    if (agreed < step()) {
      model = model_prev;
      step() = agreed;
    }
    comm.emplace(std::move(smaller));
    formed();
  }

  // Steps until told to stop (true), or until cut off by a partition (false).
  bool run() {
    for (;;) {
      std::vector<int> lost;
      try {
        one_step();
        continue;
      } catch (const strata::PeerLostError& e) {
        lost = e.lost_ranks();
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "stop") return true;
        throw;
      }
      if (!recover(lost)) return false;
    }
  }

  // A new rank, or one cut off: waits for a ticket naming its grow, then joins.
  bool join_through_ticket() {
    const std::int64_t ticket = store->add("join/requests", 1) - 1;
    std::string spec;
    while (spec.empty()) {
      if (board->stop.load()) return false;  // the job ended before a grow took this joiner in
      try {
        spec = store->get("join/ticket/" + std::to_string(ticket), Clock::now() + 1s);
      } catch (const strata::TimeoutError&) {
      }
    }
    const auto space = spec.find(' ');
    comm.emplace(Communicator::join(store, -1, std::stoi(spec.substr(space + 1)), "grow-" + spec.substr(0, space), opts));
    return true;
  }
};

int worker_main(Board* board, const std::string& root, int id, int initial_size) {
  Worker w{board, strata::connect_store(root), id, {}};
  w.opts.transport = strata::TransportKind::tcp;
  w.opts.timeout = 20s;
  w.opts.arbiter = w.store;  // the store in region east breaks a tie between the regions
  if (initial_size > 0) {
    w.comm.emplace(std::make_shared<strata::bootstrap::PrefixStore>(w.store, "init/"), id, initial_size, w.opts);
  } else if (!w.join_through_ticket()) {
    return 0;
  }
  for (;;) {
    w.formed();
    if (w.run()) return 0;
    // Cut off by a partition: as an operator's supervisor would, wait for the link, then
    // rejoin the side that went on (its store connection may have died in the cut).
    w.comm.reset();
    while (board->cut.load() && !board->stop.load()) std::this_thread::sleep_for(50ms);
    if (board->stop.load()) return 0;
    w.store = strata::connect_store(root);
    w.opts.arbiter = w.store;
    if (!w.join_through_ticket()) return 0;
  }
}

struct Options {
  int ranks = 4;
  double seconds = 60;
  double kill_every = 10;
  double stop_fraction = 0.3;
  double stall_limit = 30;
  int delay_ms = 2;
  unsigned seed = 1;
  int partition_every = 0;  // every that many events is a partition instead of a kill
  double partition_s = 4;
};

// The regions' namespaces when partitions are on (the driver and region east in side 0).
std::optional<strata::test::NetnsPair> g_net;

pid_t spawn(Board* board, const std::string& root, int id, int initial_size, const Options& o) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const std::string region = id % 2 == 0 ? "east" : "west";  // replacements keep the regions even
  if (g_net && region == "west") g_net->enter(1);
  ::setenv("STRATA_REGION", region.c_str(), 1);
  ::setenv("STRATA_HOST", ("host" + std::to_string(id)).c_str(), 1);
  ::setenv("STRATA_WAN_EMULATE", ("delay=" + std::to_string(o.delay_ms) + "ms").c_str(), 1);
  ::setenv("STRATA_HEARTBEAT_S", "1", 1);
  ::setenv("STRATA_PROBE", "0", 1);
  ::setenv("STRATA_DEBUG", "ERROR", 1);
  int code = 1;
  try {
    code = worker_main(board, root, id, initial_size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos worker %d failed: %s\n", id, e.what());
  }
  std::fflush(stderr);
  ::_exit(code);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int driver(const Options& o) {
  auto* board = new (::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Board;
  std::string host = "127.0.0.1";
  if (o.partition_every > 0) {
    if (const auto why = strata::test::NetnsPair::unavailable(); !why.empty()) {
      std::printf("strata-chaos: skipped: partitions need two network namespaces, and %s\n", why.c_str());
      return 77;
    }
    g_net.emplace();
    g_net->enter(0);  // the store lives in region east, and so does every worker forked from here
    host = g_net->address(0);
  }
  strata::bootstrap::StoreServer server(host, 0, {});  // outlives every worker
  const std::string root = host + ":" + std::to_string(server.port());
  std::mt19937 rng(o.seed);
  std::map<pid_t, int> alive;  // pid -> worker id
  int next_id = 0;
  for (; next_id < o.ranks; ++next_id) alive[spawn(board, root, next_id, o.ranks, o)] = next_id;

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  enum class Phase { steady, recovering, growing, partitioned } phase = Phase::steady;
  auto next_kill = start + std::chrono::duration<double>(o.kill_every);
  std::int64_t kill_ns = 0, spawn_ns = 0, cut_ns = 0;
  int events = 0, partitions = 0;
  std::vector<double> partition_s;  // the cut to the next step of the side that went on
  std::vector<std::pair<pid_t, Clock::time_point>> stopped;  // SIGSTOPped, killed for good later
  int kills = 0, stops = 0, joined = 0, failures = 0;
  std::vector<double> recover_s, recover_stop_s;
  bool last_was_stop = false;
  double longest_stall = 0;
  std::string verdict;

  while (Clock::now() < end && verdict.empty()) {
    std::this_thread::sleep_for(20ms);
    for (int status = 0;;) {
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      const auto it = alive.find(pid);
      if (it == alive.end()) continue;  // a victim
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
      alive.erase(it);
    }
    if (failures > 0) verdict = "a worker failed (see its message above)";
    const std::int64_t now = now_ns();
    if (board->two_sides.load() > 0) verdict = "two sides of a partition completed steps at once";
    const std::int64_t last = std::max({board->last_step_ns.load(), board->formed_ns.load(), kill_ns, cut_ns,
                                        std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count()});
    longest_stall = std::max(longest_stall, static_cast<double>(now - last) / 1e9);
    if (longest_stall > o.stall_limit) verdict = "no progress for " + std::to_string(o.stall_limit) + " s";
    for (auto it = stopped.begin(); it != stopped.end();)
      if (Clock::now() - it->second > 5s) {
        ::kill(it->first, SIGKILL);
        it = stopped.erase(it);
      } else {
        ++it;
      }

    const bool full = board->world.load() == o.ranks && static_cast<int>(alive.size()) == o.ranks;
    if (phase == Phase::steady && Clock::now() >= next_kill && full && o.partition_every > 0 &&
        ++events % (o.partition_every + 1) == 0) {
      cut_ns = now_ns();
      g_net->cut(true);
      board->cut.store(1);
      ++partitions;
      phase = Phase::partitioned;
    } else if (phase == Phase::partitioned && now_ns() - cut_ns > static_cast<std::int64_t>(o.partition_s * 1e9) &&
               board->formed_ns.load() > cut_ns && board->first_step_ns.load() > board->formed_ns.load()) {
      // One side went on; the link comes back and the other side rejoins it.
      partition_s.push_back(static_cast<double>(board->first_step_ns.load() - cut_ns) / 1e9);
      g_net->cut(false);
      board->cut.store(0);
      spawn_ns = now_ns();
      phase = Phase::growing;
    } else if (phase == Phase::steady && Clock::now() >= next_kill && full) {
      auto victim = alive.begin();
      std::advance(victim, static_cast<long>(rng() % alive.size()));
      last_was_stop = std::uniform_real_distribution<double>(0, 1)(rng) < o.stop_fraction;
      kill_ns = now_ns();
      ::kill(victim->first, last_was_stop ? SIGSTOP : SIGKILL);
      if (last_was_stop) stopped.emplace_back(victim->first, Clock::now());
      (last_was_stop ? stops : kills)++;
      alive.erase(victim);
      phase = Phase::recovering;
    } else if (phase == Phase::recovering && board->world.load() == o.ranks - 1 && board->formed_ns.load() > kill_ns &&
               board->last_step_ns.load() > board->formed_ns.load()) {
      // A step the victim had already fed may complete after the signal; only one of the
      // shrunk world counts.
      (last_was_stop ? recover_stop_s : recover_s).push_back(static_cast<double>(board->last_step_ns.load() - kill_ns) / 1e9);
      spawn_ns = now_ns();
      alive[spawn(board, root, next_id, 0, o)] = next_id;
      ++next_id;
      phase = Phase::growing;
    } else if (phase == Phase::growing && board->formed_ns.load() > spawn_ns && board->world.load() == o.ranks) {
      ++joined;
      phase = Phase::steady;
      next_kill = Clock::now() + std::chrono::duration<double>(
                                     std::uniform_real_distribution<double>(0.5, 1.5)(rng) * o.kill_every);
    }
  }

  board->stop.store(1);
  if (board->cut.load()) {
    g_net->cut(false);
    board->cut.store(0);
  }
  const auto give_up = Clock::now() + 30s;
  while (!alive.empty() && Clock::now() < give_up) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(20ms);
      continue;
    }
    const auto it = alive.find(pid);
    if (it == alive.end()) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    alive.erase(it);
  }
  for (const auto& [pid, id] : alive) ::kill(pid, SIGKILL);
  for (const auto& [pid, when] : stopped) ::kill(pid, SIGKILL);
  if (!alive.empty() && verdict.empty()) verdict = std::to_string(alive.size()) + " worker(s) did not stop";
  while (::waitpid(-1, nullptr, 0) > 0) {
  }

  auto all = recover_s;
  all.insert(all.end(), recover_stop_s.begin(), recover_stop_s.end());
  std::printf("chaos: %.0f s, %d ranks in 2 regions (tcp inside, WAN link between, %d ms delay), heartbeat 1 s, seed %u\n",
              o.seconds, o.ranks, o.delay_ms, o.seed);
  std::printf("ranks lost: %d (%d SIGKILL, %d SIGSTOP), of which %zu recovered before the run ended; replacements "
              "joined: %d\n",
              kills + stops, kills, stops, all.size(), joined);
  std::printf("steps completed: %lld; wrong results: %lld; worker failures: %d; longest stall: %.2f s\n",
              static_cast<long long>(board->steps.load()), static_cast<long long>(board->wrong.load()), failures,
              longest_stall);
  std::printf("kill to the survivors' next completed step, shrink included: median %.2f s, max %.2f s "
              "(SIGKILL median %.2f s, SIGSTOP median %.2f s)\n",
              median(all), all.empty() ? 0.0 : *std::max_element(all.begin(), all.end()), median(recover_s),
              median(recover_stop_s));
  if (o.partition_every > 0)
    std::printf("partitions: %d of %.1f s or more (the side that may not go on rejoins after); cut to the next step of "
                "the side that went on: median %.2f s, max %.2f s; steps completed by a second side: %lld\n",
                partitions, o.partition_s, median(partition_s),
                partition_s.empty() ? 0.0 : *std::max_element(partition_s.begin(), partition_s.end()),
                static_cast<long long>(board->two_sides.load()));
  if (board->wrong.load() > 0) verdict = "wrong result: " + std::string(board->first_wrong);
  if (verdict.empty() && kills + stops == 0) verdict = "no rank was killed: run longer than --kill-every";
  if (!verdict.empty()) {
    std::printf("FAILED: %s\n", verdict.c_str());
    return 1;
  }
  std::printf("PASSED\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata-chaos: kill and replace ranks of a training-like loop, check every step"};
  Options o;
  app.add_option("--ranks", o.ranks, "ranks at full strength, half per region")->check(CLI::Range(2, 16))->capture_default_str();
  app.add_option("--seconds", o.seconds, "how long to run")->check(CLI::Range(1.0, 86400.0))->capture_default_str();
  app.add_option("--kill-every", o.kill_every, "mean seconds between kills (each after the last replacement joined)")
      ->check(CLI::Range(0.5, 3600.0))->capture_default_str();
  app.add_option("--stop-fraction", o.stop_fraction, "share of victims frozen with SIGSTOP instead of killed")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--stall-limit", o.stall_limit, "seconds without a completed step that fail the run")
      ->check(CLI::Range(1.0, 3600.0))->capture_default_str();
  app.add_option("--delay-ms", o.delay_ms, "emulated one-way delay between the regions")->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_option("--seed", o.seed, "victims, signals and timing")->capture_default_str();
  app.add_option("--partition-every", o.partition_every,
                 "after every N kills, cut the link between the regions instead (0: never; needs root: the regions "
                 "run in network namespaces)")->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_option("--partition-s", o.partition_s, "seconds at least that a cut lasts")
      ->check(CLI::Range(1.0, 600.0))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  return driver(o);
}
