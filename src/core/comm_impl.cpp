#include "core/comm_impl.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>

#include <boost/system/system_error.hpp>

#include "base/config.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "bootstrap/liveness_port.hpp"
#include "core/mesh_store.hpp"
#include "core/quorum.hpp"
#include "core/world_join.hpp"
#include "strata/errors.hpp"
#include "hierarchy/hierarchical.hpp"
#include "hierarchy/plan_cost.hpp"
#include "quant/compressed_allreduce.hpp"
#include "collectives/ps_protocol.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/alltoall.hpp"
#include "collectives/registry.hpp"
#include "quant/compression.hpp"
#include "topology/topology_file.hpp"
#include "transport/address_exchange.hpp"
#include "transport/tags.hpp"

namespace strata::detail {

using transport::Clock;

namespace {

// How long a collective that saw a connection fail waits for the control mesh to say
// why: a dead peer's data links and control connection close at about the same moment.
constexpr auto kExplainGrace = std::chrono::milliseconds(500);
// A shrink whose quorum is in doubt asks the excluded ranks' hosts for their control
// ports this long (a connection refused: the process is gone).
constexpr auto kDeathProbe = std::chrono::milliseconds(1500);
// Separates a shrink proposal's excluded ranks from the ones its rank found gone.
constexpr std::string_view kDeadMark = " dead ";

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code();
  } catch (...) {
    return ErrorCode::internal;
  }
}

// A timeout, told which rank never started the collective; any other error as it is.
std::exception_ptr with_absent(const std::exception_ptr& e, const std::string& absent) {
  try {
    std::rethrow_exception(e);
  } catch (const TimeoutError& t) {
    return std::make_exception_ptr(TimeoutError(std::string(t.what()) + "; " + absent));
  } catch (...) {
    return e;
  }
}

// " (algorithm ring here, double_tree there)" when only the algorithms differ, which the
// descriptions do not show.
std::string algorithm_difference(const Fingerprint& mine, const Fingerprint& theirs) {
  if (mine.algorithm == theirs.algorithm) return "";
  auto name = [](std::uint8_t id) -> std::string {
    const auto all = collectives::algorithms();
    return id == 0 || id > all.size() ? "automatic" : all[id - 1u].name;
  };
  return " (algorithm " + name(mine.algorithm) + " here, " + name(theirs.algorithm) +
         " there: different CallOptions::algorithm or STRATA_ALGO)";
}

}  // namespace

CommImpl::CommImpl(const Setup& s)
    : rank_(s.rank),
      size_(s.size),
      settings_(check_settings(s.options)),
      kind_(settings_.transport),
      timeout_(settings_.timeout),
      chunk_bytes_(settings_.chunk_bytes),
      send_seq_(static_cast<std::size_t>(std::max(s.size, 0))),
      recv_seq_(static_cast<std::size_t>(std::max(s.size, 0))) {
  if (size_ < 1) throw InvalidArgument("communicator size " + std::to_string(size_) + " must be at least 1");
  if (rank_ < 0 || rank_ >= size_)
    throw InvalidArgument("rank " + std::to_string(rank_) + " is out of range for size " + std::to_string(size_));
  log::set_rank(rank_);
  default_compression_ = settings_.compression;
  arbiter_ = s.options.arbiter;
  bootstrap(s, Clock::now() + timeout_);
  configure_spin();
  engine_ = std::make_shared<Engine>(*transport_, [this](const std::exception_ptr& e) { return on_error(e); });
  engine_->start();
  if (rank_ == 0 && log::enabled(log::Level::info))
    log::info("communicator of " + std::to_string(size_) + " ranks over " + transport_->name() +
              "; settings:\n" + config::dump());
}

CommImpl::~CommImpl() {
  engine_->stop();  // drains queued work first
  engine_.reset();
  // Goodbye first: it also ends the mesh's calls into this object, which mesh_.reset()
  // could not stop before the pointer is already null.
  mesh_->goodbye();  // so the transport's closing is not taken for a death
  mesh_.reset();
  close_servers();
  transport_.reset();
}

void CommImpl::close_servers() {
  if (servers_ == 0 || transport_->aborted()) return;
  // Servers stop once every worker has said so; one that never hears it is stopped by
  // its launcher, so a bounded wait is enough here.
  static const ps::PushHeader bye;  // op close
  std::vector<transport::RequestPtr> sent;
  for (int j = 0; j < servers_; ++j)
    sent.push_back(transport_->isend(size_ + j, ps::tag(ps::Stream::header), &bye, sizeof bye));
  try {
    if (!transport::wait_all(*transport_, sent, Clock::now() + std::chrono::seconds(5)))
      log::warn("closing: a dedicated server did not take the close message within 5 s");
  } catch (const std::exception& e) {
    log::warn(std::string("closing: could not tell the dedicated servers: ") + e.what());
  }
}

void CommImpl::bootstrap(const Setup& s, Clock::time_point deadline) {
  servers_ = settings_.servers;
  if (settings_.refused.empty()) ensure_descriptors();
  try {
    std::shared_ptr<Store> inner = s.store;
    if (s.secret) {
      secret_ = *s.secret;
    } else if (auto configured = bootstrap::JobSecret::from_config()) {
      secret_ = *configured;
    }
    if (!inner) {
      const auto [host, port] = bootstrap::split_host_port(s.root, "rendezvous address");
      if (s.serve_root && rank_ == 0) server_ = std::make_unique<bootstrap::StoreServer>(host, port, secret_);
      inner = std::make_shared<bootstrap::TcpStore>(host, port, deadline, secret_);
    }
    bootstrap::PrefixStore store(inner, s.key_prefix);
    if (!s.secret) secret_ = resolve_secret(store, rank_, s.store != nullptr, deadline);
    const WorldShape shape{rank_, size_, servers_};
    mesh_ = std::make_unique<bootstrap::ControlMesh>(rank_, size_, transport::listen_host(store),
                                                     bootstrap::MeshTiming{settings_.heartbeat, settings_.keepalive},
                                                     secret_);
    Published mine{mesh_->address(), {settings_.refused_text(), settings_.shared_text()}, "",
                   bootstrap::liveness_address(mesh_->host())};
    if (rank_ == 0) mine.lineage = s.lineage.empty() ? bootstrap::JobSecret::random().hex().substr(0, 32) : s.lineage;
    auto joined = exchange_localities(store, shape, deadline, timeout_, mine);
    refuse_disagreement(store, joined.settings, deadline);
    lineage_ = joined.lineage;
    auto& all = joined.localities;
    const auto& controls = joined.controls;
    livenesses_.assign(joined.livenesses.begin(), joined.livenesses.begin() + size_);
    localities_.assign(all.begin(), all.begin() + size_);
    plan_levels();  // may move workers by the topology file's placements
    std::copy(localities_.begin(), localities_.end(), all.begin());
    transport_ = connect_world(store, kind_, shape, all, deadline, secret_);
    if (!config::given(config::chunk_bytes)) chunk_bytes_ = transport_->chunk_bytes();
    connect_mesh(std::vector<std::string>(controls.begin(), controls.begin() + size_), deadline);
    build_selector(store, deadline);
    // The store rank 0 serves ends with it, so rank 0 leaves creation (and may then leave
    // the job) only once every other rank is done with the store: a rank still reading
    // the probe's figures once lost it to rank 0 meeting a mismatch and exiting first.
    if (rank_ != 0) {
      store.set("done/" + std::to_string(rank_), "");
    } else if (server_) {
      std::vector<std::string> done;
      for (int r = 1; r < size_; ++r) done.push_back("done/" + std::to_string(r));
      if (!done.empty()) store.get(done, deadline);
    }
  } catch (const TimeoutError& e) {
    // Ranks that "did not join" may have been turned away by this rank's own store.
    if (server_ && !server_->trouble().empty()) throw TimeoutError(std::string(e.what()) + "; " + server_->trouble());
    throw;
  } catch (const boost::system::system_error& e) {
    // A socket or event descriptor the OS refused (Asio throws these from constructors).
    throw TransportError("communicator creation on rank " + std::to_string(rank_) + ": " + e.what() +
                         sys::limit_note(e.code()));
  }
}

void CommImpl::refuse_disagreement(bootstrap::Store& store, const std::vector<PublishedSettings>& published,
                                   Clock::time_point deadline) {
  std::vector<std::string> refused, shared;
  for (int r = 0; r < size_; ++r) {
    refused.push_back(published[static_cast<std::size_t>(r)].refused);
    shared.push_back(published[static_cast<std::size_t>(r)].shared);
  }
  const std::string why = settings_verdict(refused, shared, rank_);
  if (why.empty()) return;
  // Every rank reads the same records and fails alike; the rank serving the store keeps
  // it up until the others have read them (or a few seconds), so they fail with this
  // reason rather than with a store that went away.
  store.set("settings-read/" + std::to_string(rank_), "");
  if (server_) {
    std::vector<std::string> read;
    for (int r = 0; r < size_; ++r) read.push_back("settings-read/" + std::to_string(r));
    try {
      store.get(read, std::min(deadline, Clock::now() + std::chrono::seconds(10)));
    } catch (const TimeoutError&) {
    }
  }
  throw InvalidArgument("communicator creation on rank " + std::to_string(rank_) + ": " + why);
}

void CommImpl::connect_mesh(const std::vector<std::string>& addresses, Clock::time_point deadline) {
  bootstrap::ControlMesh::Events events;
  events.lost = [this](int r, const std::string& why) { on_peer_lost(r, why); };
  events.notice = [this](const bootstrap::ControlNotice& n) { on_notice(n); };
  mesh_->connect(addresses, deadline, std::move(events), livenesses_);
}

void CommImpl::ensure_descriptors() {
  // Every peer may cost a socket each way on the intra-region fabric, K striped streams
  // each way across regions, and one control connection; rank 0 holds one store
  // connection per process.
  const std::uint64_t procs = static_cast<std::uint64_t>(size_ + servers_);
  const std::uint64_t streams =
      config::get(config::wan_link) == 0 ? 0 : static_cast<std::uint64_t>(std::max<std::int64_t>(config::get(config::wan_streams), 4));
  const std::uint64_t want = 64 + procs * (3 + 2 * streams) + (rank_ == 0 ? procs : 0);
  const std::uint64_t have = sys::raise_open_file_limit(want);
  if (have != 0 && have < want)
    log::warn("this process may have at most " + std::to_string(have) + " open files (RLIMIT_NOFILE, hard limit) but " +
              std::to_string(procs) + " processes may need up to about " + std::to_string(want) +
              " here; if connections fail with 'Too many open files', raise it with 'ulimit -n'");
}

namespace {

// Every rank asks only about its own peers; shares_memory gives the same answer on every
// rank of a host, so all members of a group come to the same verdict.
bool all_share_memory(const transport::Transport& t, const collectives::Group& g) {
  for (int i = 0; i < g.size(); ++i)
    if (i != g.me && !t.shares_memory(g.rank(i))) return false;
  return true;
}

}  // namespace

void CommImpl::build_selector(bootstrap::Store& store, Clock::time_point deadline) {
  configure_spin();  // probes wait for round trips the way collectives wait for messages
  probe::ProbeInputs in;
  in.rank = rank_;
  in.size = size_;
  in.localities = &localities_;
  in.transport = transport_.get();
  in.store = &store;
  in.deadline = deadline;
  in.file = topo_file_ ? &*topo_file_ : nullptr;
  // What else changes the figures of the same ranks: the fabric and the WAN link's shape.
  in.cache_key = std::string("transport=") + transport_->name() + " wan_link=" + config::text(config::wan_link) +
                 " wan_streams=" + config::text(config::wan_streams) + " wan_emulate=" + config::get(config::wan_emulate);
  auto figures = probe::agree_figures(in, &probe_report_);
  // Every rank of a communicator spanning regions waits the same way, so all add the same.
  figures.wait_alpha = std::chrono::duration<double>(transport_->wait_latency()).count();
  figures.chunk_bytes = chunk_bytes_;  // the model cuts vectors as the algorithms will
  selector_ = std::make_unique<topology::Selector>(
      std::move(figures), localities_, topology::parse_algorithm_rules(config::get(config::algo), "STRATA_ALGO", true));
  world_ = collectives::Group::world(rank_, size_);
  for (int j = 0; j < servers_; ++j) world_.servers.push_back(size_ + j);
  world_.shared_memory = all_share_memory(*transport_, world_);
  selector_->add_group(world_);
  if (size_ > 1 && config::get(config::tune) != 0) {
    topology::Tuner::Options t;
    t.samples = static_cast<int>(config::get(config::tune_samples));
    tuner_ = std::make_unique<topology::Tuner>(*selector_, t);
  }
  if (plan_) {
    hierarchy::order_regions(*plan_, localities_, selector_->figures());
    if (rank_ == 0 && plan_->region_ring->order.size() > 2)
      log::info("regions in ring order: " + topology::describe(*plan_->region_ring, selector_->figures()));
    for (auto& g : plan_->mine) {
      g.shared_memory = all_share_memory(*transport_, g);
      selector_->add_group(g);
    }
    plan_->pricing = hierarchy::price_levels(*selector_, *plan_);
  }
  if (rank_ == 0 && log::enabled(log::Level::info)) {
    const auto& f = selector_->figures();
    std::string s = "link figures (" +
                    std::string(probe_report_.how == probe::ProbeReport::How::probed   ? "probed"
                                : probe_report_.how == probe::ProbeReport::How::cached ? "cached"
                                                                                           : "not probed: ") +
                    (probe_report_.how == probe::ProbeReport::How::skipped ? probe_report_.why : "") + ", " +
                    std::to_string(probe_report_.seconds * 1e3) + " ms):";
    for (int c = 0; c < topology::kLinkClasses; ++c) {
      const auto& l = f.link[c];
      s += std::string(" ") + topology::to_string(static_cast<topology::LinkClass>(c)) + " alpha " +
           std::to_string(l.cost.alpha * 1e6) + " us beta " + std::to_string(l.cost.beta * 1e9) + " ns/B gap " +
           std::to_string(l.cost.gap * 1e6) + " us (" + topology::to_string(l.source) + ");";
    }
    s += " gamma " + std::to_string(f.gamma * 1e9) + " ns/B";
    log::info(s);
  }
}

void CommImpl::plan_levels() {
  topo_file_ = topology::load_topology_from_env(size_);
  if (topo_file_) localities_ = topology::apply_placements(*topo_file_, std::move(localities_));
  plan_ = hierarchy::make_plan(localities_, rank_, hierarchy::parse_choice(config::get(config::algo)));
  if (plan_ && rank_ == 0) log::info(plan_->describe());
}

void CommImpl::configure_spin() {
  transport::set_spin(std::chrono::microseconds(config::get(config::spin_us)));
}

const Locality& CommImpl::locality(int r) const {
  if (r < 0 || r >= size_) throw InvalidArgument("locality: rank " + std::to_string(r) + " is out of range");
  return localities_[static_cast<std::size_t>(r)];
}

void CommImpl::check_usable() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  const std::string what = "communicator on rank " + std::to_string(rank_) + " is unusable";
  // A failure another rank saw keeps its class here: a mismatch or a loss reported
  // before this rank even reached the collective is still one.
  if (auto verdict = health_.verdict(what)) std::rethrow_exception(verdict);
  std::lock_guard<std::mutex> lock(fail_mu_);
  throw AbortedError(what + " after an earlier failure: " + failure_);
}

std::exception_ptr CommImpl::on_error(const std::exception_ptr& e) {
  if (e == settled_) return e;  // a collective's, settled where it failed
  return settle("", 0, e);
}

std::exception_ptr CommImpl::settle(const std::string& what, std::uint64_t seq, const std::exception_ptr& symptom,
                                   const std::string& hint) {
  bool news = false;
  auto err = health_.explain(what, symptom, kExplainGrace, &news, hint);
  const std::string text = message_of(err);
  // Before the transport closes, so that peers hear why before they see it close.
  if (news && !failed_.load(std::memory_order_acquire)) tell_everyone(code_of(err), seq, text);
  fail_all(text);
  log::warn(text);
  settled_ = err;
  return err;
}

void CommImpl::tell_everyone(ErrorCode code, std::uint64_t seq, const std::string& text, std::vector<int> lost) {
  bootstrap::ControlNotice n;
  n.from = rank_;
  n.code = static_cast<int>(code);
  n.seq = seq;
  n.lost = std::move(lost);
  n.text = text;
  mesh_->broadcast(n);
}

void CommImpl::fail_all(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(fail_mu_);
    if (!failed_.load()) failure_ = why;
    failed_.store(true, std::memory_order_release);
  }
  // Stop all traffic so no late message can land in a buffer the caller owns again.
  transport_->abort(why);
}

void CommImpl::on_peer_lost(int r, const std::string& why) {
  if (!health_.lose(r, why)) return;
  const std::string text = "rank " + std::to_string(r) + " was lost: " + why;
  log::warn(text);
  // Every survivor's mesh sees a death itself, but only neighbours see a silence; and a
  // partition may hide either from some. One notice per finder settles it for everyone.
  tell_everyone(ErrorCode::peer_lost, 0, why, {r});
  fail_all(text);
}

void CommImpl::on_notice(const bootstrap::ControlNotice& n) {
  const std::string by = "rank " + std::to_string(n.from);
  if (n.code == static_cast<int>(ErrorCode::peer_lost)) {
    bool news = false;
    for (int r : n.lost) news = health_.lose(r, by + " found: " + n.text) || news;
    if (news) fail_all(by + " reports lost rank(s): " + n.text);
    return;
  }
  health_.report(n);
  fail_all(by + " reported a failure: " + n.text);
}

void CommImpl::abort(const std::string& why) {
  if (!failed_.load(std::memory_order_acquire)) tell_everyone(ErrorCode::aborted, 0, why);
  fail_all(why);
}

std::unique_ptr<CommImpl> CommImpl::shrink(std::span<const int> excluded_in, const CommOptions& opts) {
  const std::string who = "shrink on rank " + std::to_string(rank_);
  std::vector<int> excluded(excluded_in.begin(), excluded_in.end());
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  for (int r : excluded)
    if (r < 0 || r >= size_)
      throw InvalidArgument(who + ": lost rank " + std::to_string(r) + " is out of range for " + std::to_string(size_) + " ranks");
  if (std::binary_search(excluded.begin(), excluded.end(), rank_))
    throw InvalidArgument(who + ": this rank is among the ranks to exclude");
  if (servers_ > 0) throw InvalidArgument(who + ": a communicator with dedicated parameter servers cannot shrink");
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) members.push_back(r);
  const std::string prefix = "shrink/" + std::to_string(++shrinks_) + "/";
  const auto deadline = Clock::now() + (opts.timeout.count() > 0 ? opts.timeout : timeout_);

  // Every member proposes whom it excludes; a member that disagrees would build another
  // world, so all of them fail instead. Proposals go to every rank still connected, so
  // that a member left out by another's list hears the disagreement too. Where the
  // members are no majority, each also says which excluded ranks it found gone for good
  // (core/quorum.hpp); those every member found do not count.
  const std::string mine = rank_list(excluded);
  const bool in_doubt = 2 * members.size() <= static_cast<std::size_t>(size_);
  const auto dead_here = in_doubt ? mesh_->confirm_dead(excluded, kDeathProbe) : std::vector<int>{};
  std::vector<int> everyone(static_cast<std::size_t>(size_));
  std::iota(everyone.begin(), everyone.end(), 0);
  mesh_->put(prefix + "excluded/" + std::to_string(rank_), mine + std::string(kDeadMark) + rank_list(dead_here), everyone);
  std::vector<std::string> keys;
  for (int r : members) keys.push_back(prefix + "excluded/" + std::to_string(r));
  const auto theirs = mesh_->wait(keys, deadline, members);
  std::vector<int> dead = dead_here;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto mark = theirs[i].find(kDeadMark);
    const std::string list = theirs[i].substr(0, mark);
    if (list != mine)
      throw MismatchError(who + ": rank " + std::to_string(members[i]) + " excludes ranks " + list +
                          " but this rank excludes " + mine + "; every survivor must pass the same lost ranks");
    const auto found = parse_rank_list(mark == std::string::npos ? "{}" : theirs[i].substr(mark + kDeadMark.size()));
    std::erase_if(dead, [&](int d) { return std::find(found.begin(), found.end(), d) == found.end(); });
  }
  auto arbiter = opts.arbiter ? opts.arbiter : arbiter_;
  if (!arbiter && in_doubt && !config::get(config::arbiter).empty())
    arbiter = connect_store(config::get(config::arbiter), std::chrono::seconds(5));
  require_quorum({who, size_, members, dead, rank_, arbiter.get(), "strata-arbiter/" + lineage_, deadline});

  Setup s;
  s.rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  s.size = static_cast<int>(members.size());
  s.store = std::make_shared<MeshStore>(*mesh_, members);
  s.key_prefix = prefix;
  s.secret = secret_;
  s.lineage = lineage_ + "/" + rank_list(members);
  s.options = opts;
  s.options.arbiter = arbiter;
  if (s.options.transport == TransportKind::automatic) s.options.transport = kind_;
  if (s.options.timeout.count() == 0) s.options.timeout = timeout_;
  return std::make_unique<CommImpl>(s);
}

Work CommImpl::collective(const collectives::CollArgs& a, const CallOptions& o) {
  check_usable();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  std::lock_guard<std::mutex> lock(issue_mu_);
  Fingerprint fp;
  fp.seq = next_seq_++;
  fp.kind = a.kind;
  fp.dtype = a.dtype;
  fp.count = a.count;
  fp.op = a.op;
  fp.root = a.root;
  if (a.compression) fp.compression = quant::compression_hash(*a.compression);
  collectives::CollArgs args = a;
  // A flat communicator settles the selector's choice now, so it travels in the
  // fingerprint: ranks that would pick differently (a different STRATA_ALGO) get a
  // MismatchError instead of messages that do not fit.
  // The online tuner may still run another algorithm for it (decided on the engine
  // thread, in execution order, the same on every rank), unless the call named one.
  const bool tunable = !a.algorithm && !plan_ && a.kind != CollectiveKind::alltoall;
  if (!plan_ && a.kind != CollectiveKind::alltoall)
    args.algorithm = &collectives::resolve_algorithm(*selector_, world_, args, to_string(a.kind));
  if (args.algorithm) fp.algorithm = static_cast<std::uint8_t>(static_cast<int>(args.algorithm->id) + 1);
  auto work = engine_->submit([this, fp, a = std::move(args), timeout, tunable]() -> std::optional<Pending> {
    check_usable();
    run_collective(fp, a, timeout, tunable);
    return std::nullopt;
  });
  return Work(work);
}

void CommImpl::run_collective(const Fingerprint& fp, const collectives::CollArgs& a,
                              std::chrono::milliseconds timeout, bool tunable) {
  const std::string what = fp.describe();
  collectives::Context::Params params;
  params.transport = transport_.get();
  params.seq = fp.seq;
  params.deadline = Clock::now() + timeout;
  params.scratch = &scratch_;
  params.chunk_bytes = chunk_bytes_;
  params.what = what;

  // Ring-neighbour fingerprint exchange, concurrent with the algorithm's own traffic.
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  Fingerprint theirs;
  transport::RequestPtr fp_send, fp_recv;
  if (size_ > 1) {
    const auto tag = transport::collective_tag(fp.seq, transport::Channel::fingerprint);
    fp_recv = transport_->irecv(prev, tag, &theirs, sizeof theirs);
    fp_send = transport_->isend(next, tag, &fp, sizeof fp);
    params.stamp.assign(reinterpret_cast<const char*>(&fp), sizeof fp);
    params.stamp_mismatch = [&](int peer, const std::string& bytes) {
      Fingerprint other;
      std::memcpy(&other, bytes.data(), std::min(bytes.size(), sizeof other));
      throw MismatchError("collective mismatch: rank " + std::to_string(rank_) + " called " + fp.describe() +
                          " but rank " + std::to_string(peer) + " called " + other.describe() +
                          algorithm_difference(fp, other));
    };
    params.guard = [&](bool final) {
      if (!fp_recv->done() && final)  // the fingerprint travels ahead of the data
        transport::wait(*transport_, fp_recv, Clock::now() + std::chrono::seconds(1));
      if (!fp_recv->done() || !fp_recv->error().empty()) return;
      Fingerprint expect = fp;
      if (std::memcmp(&theirs, &expect, sizeof expect) != 0)
        throw MismatchError("collective mismatch: rank " + std::to_string(rank_) + " called " +
                            fp.describe() + " but rank " + std::to_string(prev) + " called " +
                            theirs.describe() + algorithm_difference(fp, theirs));
    };
  }
  // Plans' per-level calls pick their algorithms with this communicator's selector.
  params.chooser = selector_.get();
  collectives::Context ctx(params);
  try {
    const auto& world = world_;
    if (a.kind == CollectiveKind::alltoall) {
      // Pairwise over the routed transport whatever the hierarchy: every byte has one
      // destination, so there is nothing to combine on the way.
      collectives::alltoall(ctx, world, a);
    } else if (a.compression && a.compression->scope == Compression::Scope::everywhere) {
      if (a.send != a.recv) std::memcpy(a.recv, a.send, a.count * sizeof(float));
      quant::compressed_allreduce(ctx, world, static_cast<float*>(a.recv), a.count, *a.compression, &feedback_,
                                  quant::Shard{0, a.count}, a.op, size_);
    } else if (!plan_ || !hierarchy::run_hierarchical(ctx, *plan_, a, &feedback_)) {
      // Region-scoped compression with every rank in one region: nothing crosses a WAN.
      // A call that names no algorithm lets the tuner try the model's close seconds.
      const bool tuned = tuner_ && tunable && !(a.compression && a.compression->lossy());
      collectives::CollArgs b = a;
      if (tuned)
        if (const auto* pick = tuner_->next(a.kind, a.dtype, a.count, world)) b.algorithm = pick;
      const auto start = Clock::now();
      collectives::run_collective(ctx, world, b);
      if (tuned) {
        const auto bytes = topology::message_bytes(a.kind, a.count, a.dtype, size_);
        tuner_->record(a.kind, bytes, clock_seconds(start), clock_seconds(Clock::now()));
        if (auto mine = tuner_->offer(a.kind, bytes)) {
          ctx.wait_all({fp_send, fp_recv});  // every rank ran this very call before it is counted
          params.guard(false);
          tuner_->settle(a.kind, bytes, agree_on_times(fp.seq, a.kind, bytes, *mine, params.deadline));
          if (rank_ == 0) log::info("tuned:" + tuner_->describe(a.kind, bytes));
        }
      }
    }
    if (size_ > 1) {
      ctx.wait_all({fp_send, fp_recv});
      params.guard(false);
      // A broadcast's root can finish on its own sends while a rank further on called
      // something else, and a reduce's root can fold in a partial sum of a rank that
      // did: the root finishes only once every rank has passed its check (an empty
      // message each), so the mismatch fails it too, not its next call.
      if (a.kind == CollectiveKind::broadcast || a.kind == CollectiveKind::reduce) confirm_to_root(ctx, a.root);
    }
  } catch (...) {
    // The fingerprint tells whether the previous rank ever reached this collective; a
    // timeout says so itself, any failure passes it on (an abort fails the receive too).
    const bool heard = !fp_recv || (fp_recv->done() && fp_recv->error().empty());
    const std::string absent = heard ? "" : "rank " + std::to_string(prev) + " has not started " + what;
    auto symptom = std::current_exception();
    if (!absent.empty()) symptom = with_absent(symptom, absent);
    std::rethrow_exception(settle(what + " on rank " + std::to_string(rank_), fp.seq, symptom, absent));
  }
}

void CommImpl::confirm_to_root(collectives::Context& ctx, int root) {
  std::vector<transport::RequestPtr> reqs;
  if (rank_ != root) {
    reqs.push_back(ctx.send(root, transport::Channel::confirm, nullptr, 0));
  } else {
    for (int r = 0; r < size_; ++r)
      if (r != root) reqs.push_back(ctx.recv(r, transport::Channel::confirm, nullptr, 0));
  }
  ctx.wait_all(reqs);
}

Compression CommImpl::compression_for(const CallOptions& o) const {
  return o.compression ? *o.compression : default_compression_;
}

void CommImpl::with_feedback(const std::function<void(quant::ErrorFeedback&)>& f) {
  check_usable();
  std::exception_ptr failure;
  auto work = engine_->submit([&]() -> std::optional<Pending> {
    try {
      f(feedback_);
    } catch (...) {
      failure = std::current_exception();  // the caller's error, not the communicator's
    }
    return std::nullopt;
  });
  Work(work).wait();
  if (failure) std::rethrow_exception(failure);
}

Work CommImpl::point_to_point(bool is_send, void* buf, std::size_t count, DataType dt, int peer,
                              const CallOptions& o) {
  check_usable();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  const std::size_t bytes = count * dtype_size(dt);
  std::lock_guard<std::mutex> lock(issue_mu_);
  auto& seqs = is_send ? send_seq_ : recv_seq_;
  const std::uint64_t seq = seqs[static_cast<std::size_t>(peer)]++;
  auto work = engine_->submit([=, this]() -> std::optional<Pending> {
    check_usable();
    const auto tag = transport::p2p_tag(seq);
    Pending p;
    p.deadline = Clock::now() + timeout;
    p.what = std::string(is_send ? "send #" : "recv #") + std::to_string(seq) +
             (is_send ? " to rank " : " from rank ") + std::to_string(peer) + " on rank " +
             std::to_string(rank_);
    if (is_send) {
      p.request = transport_->isend(peer, tag, buf, bytes);
    } else {
      p.request = transport_->irecv(peer, tag, buf, bytes);
      p.on_complete = [req = p.request, bytes, what = p.what] {
        if (req->bytes() != bytes)
          throw TransportError(what + ": received " + std::to_string(req->bytes()) +
                               " bytes where " + std::to_string(bytes) + " were expected");
      };
    }
    return p;
  });
  return Work(work);
}

}  // namespace strata::detail
