// strata-scale: N ranks on this machine, forked, each creating a communicator over TCP;
// then one rank is killed and every survivor's next collective fails. Prints, per N:
// creation (from the common start to each rank's communicator, median and slowest), the
// descriptors and TCP connections each rank holds after creation, and how long after the
// kill the last survivor heard of it.
//
//   build/bench/scale/strata-scale --ranks 64,128,256
//
// Every rank is a process of its own on a shared machine, so creation includes waiting
// for the CPU: compare across N in one run.
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.hpp"

namespace {

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process of the machine
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Slot {
  std::atomic<std::int64_t> created{0}, detected{0};
  std::atomic<int> fds{0}, tcp{0}, failed{0};
};

struct Shared {
  std::atomic<std::int64_t> start{0}, killed{0};
  Slot slots[1];  // n of them
};

int count_entries(const char* dir, const char* prefix) {
  int n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      if (!prefix) {
        ++n;
        continue;
      }
      char target[64] = {};
      const std::string link = std::string(dir) + "/" + e->d_name;
      if (::readlink(link.c_str(), target, sizeof target - 1) > 0 && std::string(target).rfind(prefix, 0) == 0) ++n;
    }
    ::closedir(d);
  }
  return n;
}

// Established TCP connections whose inode is one of this process's sockets.
int tcp_connections() {
  std::vector<std::string> inodes;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      char target[64] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? static_cast<std::size_t>(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.push_back(t.substr(8, t.size() - 9));
    }
    ::closedir(d);
  }
  std::sort(inodes.begin(), inodes.end());
  int n = 0;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      char local[64], remote[64], state[8];
      unsigned long inode = 0;
      if (std::sscanf(line.c_str(), "%*s %63s %63s %7s %*s %*s %*s %*s %*s %lu", local, remote, state, &inode) != 4)
        continue;
      if (std::string(state) == "01" && std::binary_search(inodes.begin(), inodes.end(), std::to_string(inode))) ++n;
    }
  }
  return n;
}

void rank_main(int rank, int n, const std::string& root, Shared* sh, int victim) {
  Slot& me = sh->slots[rank];
  try {
    strata::CommOptions o;
    o.transport = strata::TransportKind::tcp;
    o.timeout = std::chrono::seconds(300);
    strata::Communicator comm(rank, n, root, o);
    me.created = now_ns();
    me.fds = count_entries("/proc/self/fd", nullptr);
    me.tcp = tcp_connections();
    float x = 1;
    comm.allreduce(&x, &x, 1, strata::DataType::f32, strata::ReduceOp::sum).wait();
    if (x != static_cast<float>(n)) me.failed = 1;
    try {
      // The victim leaves the barrier and dies while a survivor may still be in it: that
      // survivor hears of it there.
      comm.barrier().wait();
      if (rank == victim) {
        sh->killed = now_ns();
        ::kill(::getpid(), SIGKILL);
      }
      for (int i = 0; i < 100000; ++i) {
        comm.allreduce(&x, &x, 1, strata::DataType::f32, strata::ReduceOp::sum).wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (const strata::PeerLostError&) {
      me.detected = now_ns();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    me.failed = 1;
  }
  std::_Exit(0);
}

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

void run(int n, int timeout_s) {
  const std::size_t bytes = sizeof(Shared) + sizeof(Slot) * static_cast<std::size_t>(n);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* sh = new (mem) Shared;
  for (int r = 1; r < n; ++r) new (&sh->slots[r]) Slot;
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  const std::string root = "127.0.0.1:" + std::to_string(std::uniform_int_distribution<int>(20000, 32000)(rng));
  const int victim = n - 1;
  sh->start = now_ns();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t p = ::fork();
    if (p == 0) rank_main(r, n, root, sh, victim);
    pids.push_back(p);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int left = n;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(-1, &status, WNOHANG) > 0)
      --left;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : pids) ::kill(p, SIGKILL);
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  std::vector<double> created, detect, fds, tcp;
  int fds_max = 0, tcp_max = 0, failed = 0;
  for (int r = 0; r < n; ++r) {
    const Slot& s = sh->slots[r];
    failed += s.failed.load() + (s.created.load() == 0);
    if (s.created) created.push_back(ms(s.created - sh->start));
    fds_max = std::max(fds_max, s.fds.load());
    tcp_max = std::max(tcp_max, s.tcp.load());
    if (s.created) {
      fds.push_back(s.fds.load());
      tcp.push_back(s.tcp.load());
    }
    if (r != victim && s.detected) detect.push_back(ms(s.detected - sh->killed));
  }
  std::sort(created.begin(), created.end());
  std::sort(detect.begin(), detect.end());
  std::sort(fds.begin(), fds.end());
  std::sort(tcp.begin(), tcp.end());
  auto median = [](const std::vector<double>& v) { return v.empty() ? 0.0 : v[v.size() / 2]; };
  std::printf("%6d %12.1f %12.1f %8.0f %8d %8.0f %8d %14.1f %14.1f %8zu %7d\n", n, median(created),
              created.empty() ? 0.0 : created.back(), median(fds), fds_max, median(tcp), tcp_max, median(detect),
              detect.empty() ? 0.0 : detect.back(), detect.size(), failed);
  std::fflush(stdout);
  ::munmap(mem, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Creation and failure detection of a communicator as the number of local ranks grows", "strata-scale"};
  std::vector<int> sizes{16, 32, 64};
  int timeout_s = 300;
  app.add_option("--ranks", sizes, "Numbers of ranks, each run on its own")->delimiter(',')->check(CLI::Range(2, 4096));
  app.add_option("--timeout", timeout_s, "Seconds each run may take before its ranks are killed")->check(CLI::Range(5, 3600));
  CLI11_PARSE(app, argc, argv);
  ::setenv("STRATA_PROBE", "0", 0);
  ::setenv("STRATA_TUNE", "0", 0);
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::printf("# ranks, creation ms (median, slowest), descriptors and TCP connections per rank (median, most: "
              "rank 0 also holds the store's), kill to PeerLostError ms (median, slowest survivor), survivors that "
              "heard, ranks failed\n");
  std::printf("%6s %12s %12s %8s %8s %8s %8s %14s %14s %8s %7s\n", "ranks", "create_med", "create_max", "fds_med",
              "fds_max", "tcp_med", "tcp_max", "detect_med", "detect_max", "heard", "failed");
  for (int n : sizes) run(n, timeout_s);
  return 0;
}
