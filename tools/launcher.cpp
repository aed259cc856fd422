#include "launcher.hpp"

#include "line_forwarder.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <system_error>

extern char** environ;

namespace strata::tools {

namespace {

using Clock = std::chrono::steady_clock;

// The signal handlers only write a byte here; the supervision loop polls it, so that
// signals, child exits and output all arrive through one poll().
int g_wake_fd = -1;
volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_interrupt_count = 0;

void on_signal(int sig) {
  const int saved = errno;
  if (sig != SIGCHLD) {
    if (g_interrupt == 0) g_interrupt = sig;
    g_interrupt_count = g_interrupt_count + 1;
  }
  if (g_wake_fd >= 0) {
    const char b = 0;
    [[maybe_unused]] const ssize_t n = ::write(g_wake_fd, &b, 1);
  }
  errno = saved;
}

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

// Installs the handlers for the duration of one launch and restores the previous ones.
class SignalScope {
 public:
  explicit SignalScope(int wake_fd) {
    g_wake_fd = wake_fd;
    g_interrupt = 0;
    g_interrupt_count = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < std::size(kHandled); ++i) ::sigaction(kHandled[i], &sa, &old_[i]);
    // A closed stdout (strata-run ... | head) must not kill the supervisor while ranks run.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalScope() {
    for (std::size_t i = 0; i < std::size(kHandled); ++i) ::sigaction(kHandled[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_wake_fd = -1;
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  struct sigaction old_[std::size(kHandled)] {};
  struct sigaction old_pipe_ {};
};

struct Child {
  int rank = 0;         // index among ranks, or among servers
  bool server = false;  // a dedicated parameter server
  std::string name() const { return (server ? "server " : "rank ") + std::to_string(rank); }
  pid_t pid = -1;
  bool reaped = false;
  LineForwarder out;
  LineForwarder err;
};

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(status_to_code(status));
}

// 32 bytes from the kernel as hex: the job's secret when the caller set none, so ranks
// started here prove to each other that they are this job's (README, "Security").
std::string draw_job_secret() {
  unsigned char bytes[32];
  std::FILE* f = std::fopen("/dev/urandom", "rb");
  const bool ok = f && std::fread(bytes, 1, sizeof bytes, f) == sizeof bytes;
  if (f) std::fclose(f);
  if (!ok) throw std::runtime_error("cannot read /dev/urandom for the job's secret");
  std::string hex;
  for (unsigned char b : bytes) {
    hex += "0123456789abcdef"[b >> 4];
    hex += "0123456789abcdef"[b & 15];
  }
  return hex;
}

std::vector<std::string> rank_environment(const LaunchSpec& spec, const Child& c, const std::string& root,
                                          const std::string& run_id, const std::string& secret) {
  const int rank = c.rank;
  EnvList vars = {{"STRATA_RANK", std::to_string(rank)},
                  {"STRATA_WORLD_SIZE", std::to_string(spec.nranks)},
                  {"STRATA_LOCAL_RANK", std::to_string(rank)},
                  {"STRATA_LOCAL_SIZE", std::to_string(spec.nranks)},
                  {"STRATA_ROOT", root},
                  {"STRATA_RUN_ID", run_id}};
  if (spec.nservers > 0) vars.emplace_back("STRATA_SERVERS", std::to_string(spec.nservers));
  if (!secret.empty()) vars.emplace_back("STRATA_JOB_SECRET", secret);
  if (c.server) {
    vars.emplace_back("STRATA_ROLE", "server");
    vars.emplace_back("STRATA_LOCAL_RANK", std::to_string(spec.nranks + rank));
  } else if (spec.extra_env) {
    for (auto& kv : spec.extra_env(rank)) vars.push_back(std::move(kv));
  }
  // Later entries win, and the inherited environment loses to all of them.
  std::set<std::string> overridden;
  std::vector<std::string> env;
  for (auto it = vars.rbegin(); it != vars.rend(); ++it) {
    if (overridden.insert(it->first).second) env.push_back(it->first + "=" + it->second);
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string key(entry.substr(0, entry.find('=')));
    if (!overridden.count(key)) env.emplace_back(entry);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
}

// In the child, between fork and exec: only async-signal-safe calls from here on.
[[noreturn]] void exec_rank(char* const* argv, char* const* envp, int out_fd, int err_fd,
                            int in_fd, pid_t parent, const std::string& who) {
  ::setpgid(0, 0);
  // Ranks must not outlive a supervisor that was SIGKILLed.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(in_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  ::execvpe(argv[0], argv, envp);
  const int e = errno;
  const char* msg = strerror(e);
  write_fully(STDERR_FILENO, who.data(), who.size());
  write_fully(STDERR_FILENO, ": cannot execute '", 18);
  write_fully(STDERR_FILENO, argv[0], std::strlen(argv[0]));
  write_fully(STDERR_FILENO, "': ", 3);
  write_fully(STDERR_FILENO, msg, std::strlen(msg));
  write_fully(STDERR_FILENO, "\n", 1);
  ::_exit(e == ENOENT ? 127 : 126);
}

class Supervisor {
 public:
  explicit Supervisor(const LaunchSpec& spec) : spec_(spec) {}

  int run();

 private:
  void start_all();
  void signal_live(int sig) {
    // pid 0 or -1 would signal our own group or every process we may signal.
    for (auto& c : children_)
      if (!c.reaped && c.pid > 0) ::kill(-c.pid, sig);
  }
  // Starts the SIGTERM-then-SIGKILL sequence unless it is already under way.
  void stop_all(int first_signal) {
    signal_live(first_signal);
    if (!kill_at_) kill_at_ = Clock::now() + spec_.kill_grace;
  }
  void reap();
  void note(const std::string& msg) {
    const std::string line = spec_.name + ": " + msg + "\n";
    write_fully(STDERR_FILENO, line.data(), line.size());
  }

  const LaunchSpec& spec_;
  std::vector<Child> children_;
  int wake_[2] = {-1, -1};
  std::optional<int> result_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> servers_due_;  // when lingering servers count as stuck
};

void Supervisor::start_all() {
  const std::string root = free_local_address();
  const std::string run_id = make_run_id();
  const auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
  };
  const std::string secret = set("STRATA_JOB_SECRET") || set("STRATA_JOB_SECRET_FILE") ? "" : draw_job_secret();
  const bool stdin_is_tty = ::isatty(STDIN_FILENO) == 1;
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) throw std::system_error(errno, std::generic_category(), "/dev/null");
  std::vector<std::string> args = spec_.argv;
  std::vector<char*> argv = c_strings(args);
  children_.resize(static_cast<std::size_t>(spec_.nranks + spec_.nservers));
  std::fflush(nullptr);
  for (int r = 0; r < spec_.nranks + spec_.nservers; ++r) {
    Child& c = children_[static_cast<std::size_t>(r)];
    c.server = r >= spec_.nranks;
    c.rank = c.server ? r - spec_.nranks : r;
    std::vector<std::string> env = rank_environment(spec_, c, root, run_id, secret);
    std::vector<char*> envp = c_strings(env);
    const bool show_stdout = spec_.all_stdout || r == 0;
    int out[2] = {devnull, -1};
    int err[2];
    if (show_stdout) make_pipe(out);
    make_pipe(err);
    // Only rank 0 may read stdin, and not from a terminal: a rank in its own process
    // group reading the terminal would be stopped by SIGTTIN.
    const int in = (r == 0 && !stdin_is_tty) ? STDIN_FILENO : devnull;
    const pid_t parent = ::getpid();
    const std::string who = spec_.name + ": " + c.name();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0)
      exec_rank(argv.data(), envp.data(), show_stdout ? out[1] : devnull, err[1], in, parent, who);
    ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
    c.pid = pid;
    const std::string prefix = spec_.tag_output ? "[" + c.name() + "] " : "";
    if (show_stdout) {
      ::close(out[1]);
      c.out = LineForwarder(out[0], STDOUT_FILENO, prefix);
    }
    ::close(err[1]);
    c.err = LineForwarder(err[0], STDERR_FILENO, prefix);
  }
  ::close(devnull);
}

void Supervisor::reap() {
  for (auto& c : children_) {
    if (c.reaped || c.pid <= 0) continue;
    int status = 0;
    const pid_t p = ::waitpid(c.pid, &status, WNOHANG);
    if (p != c.pid) continue;
    c.reaped = true;
    // Pick up what it printed last before any message of ours about it.
    c.out.pump();
    c.err.pump();
    const int code = status_to_code(status);
    if (code == 0 || result_) continue;
    result_ = code;
    note(c.name() + " " + describe(status) + "; stopping the other ranks");
    stop_all(SIGTERM);
  }
}

int Supervisor::run() {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  SignalScope signals(wake_[1]);
  int forwarded = 0;
  try {
    start_all();
  } catch (...) {
    stop_all(SIGKILL);
    for (auto& c : children_)
      if (c.pid > 0 && !c.reaped) ::waitpid(c.pid, nullptr, 0);
    ::close(wake_[0]);
    ::close(wake_[1]);
    throw;
  }
  const bool has_deadline = spec_.timeout.count() > 0;
  const Clock::time_point deadline = has_deadline ? Clock::now() + spec_.timeout : Clock::time_point::max();
  for (;;) {
    reap();
    if (std::all_of(children_.begin(), children_.end(), [](const Child& c) { return c.reaped; })) break;

    const int sig = g_interrupt;
    if (sig != 0 && forwarded == 0) {
      forwarded = sig;
      if (!result_) result_ = 128 + sig;
      note(std::string("got ") + strsignal(sig) + "; forwarding it to the ranks");
      stop_all(sig);
    } else if (g_interrupt_count > 1 && kill_at_ != Clock::time_point::max()) {
      // A second Ctrl-C means "now", as with mpirun.
      signal_live(SIGKILL);
      kill_at_ = Clock::time_point::max();
    }
    const auto now = Clock::now();
    if (has_deadline && now >= deadline && !result_) {
      result_ = kTimeoutExitCode;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", static_cast<double>(spec_.timeout.count()) / 1000.0);
      note(std::string("timed out after ") + secs + " s; stopping all ranks");
      stop_all(SIGTERM);
    }
    // Servers stop when the ranks close their communicators; one that does not is stuck.
    if (!servers_due_ && std::all_of(children_.begin(), children_.end(),
                                     [](const Child& c) { return c.server || c.reaped; }))
      servers_due_ = now + std::chrono::seconds(10);
    if (servers_due_ && now >= *servers_due_ && !kill_at_) {
      if (!result_) result_ = 1;
      note("dedicated servers still running 10 s after the ranks finished; stopping them");
      stop_all(SIGTERM);
    }
    if (kill_at_ && now >= *kill_at_) {
      signal_live(SIGKILL);
      kill_at_ = Clock::time_point::max();  // once is enough
    }

    std::vector<pollfd> pfds{{wake_[0], POLLIN, 0}};
    std::vector<LineForwarder*> streams;
    for (auto& c : children_) {
      for (LineForwarder* s : {&c.out, &c.err}) {
        if (!s->is_open()) continue;
        pfds.push_back({s->fd(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    // Bounded so that deadlines are honoured even if a SIGCHLD wake-up were missed.
    auto wait = std::chrono::milliseconds(100);
    const auto until = [&](Clock::time_point t) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()));
    };
    if (has_deadline && !result_) until(deadline);  // a deadline that fired no longer matters
    if (kill_at_ && *kill_at_ != Clock::time_point::max()) until(*kill_at_);
    if (servers_due_ && !kill_at_) until(*servers_due_);
    ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<long>(wait.count(), 0)));
    char drain[64];
    while (::read(wake_[0], drain, sizeof drain) > 0) {
    }
    for (std::size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) streams[i - 1]->pump();
    }
  }
  // Grandchildren may still hold the pipes open; take what is there and stop listening.
  for (auto& c : children_) {
    c.out.finish();
    c.err.finish();
  }
  ::close(wake_[0]);
  ::close(wake_[1]);
  return result_.value_or(0);
}

}  // namespace

int launch(const LaunchSpec& spec) {
  if (spec.nranks < 1) throw std::invalid_argument("the number of ranks must be at least 1");
  if (spec.nservers < 0) throw std::invalid_argument("the number of servers must not be negative");
  if (spec.argv.empty()) throw std::invalid_argument("no command to run");
  Supervisor s(spec);
  return s.run();
}

std::string free_local_address() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "finding a free port");
  }
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

std::string make_run_id() {
  static std::atomic<unsigned> counter{0};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%ld-%llx-%u", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(ns), counter++);
  return buf;
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

bool launched_externally() {
  for (const char* v : {"STRATA_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (env_set(v)) return true;
  return false;
}

std::string self_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) throw std::system_error(errno, std::generic_category(), "readlink /proc/self/exe");
  path.resize(static_cast<std::size_t>(n));
  return path;
}

}  // namespace strata::tools
