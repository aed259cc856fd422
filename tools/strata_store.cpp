// strata-store: the rendezvous store as a process of its own, for jobs whose ranks come
// and go: a communicator created from it (Communicator(connect_store(...), rank, size)),
// and every grow() and join(), outlive any rank, rank 0 included.
//
//   strata-store --host 10.0.0.1 --port 29500      # until SIGINT or SIGTERM
//
// Only clients that know the job's secret (STRATA_JOB_SECRET or STRATA_JOB_SECRET_FILE,
// set alike for the store and the ranks) get a request answered.
#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "bootstrap/tcp_store.hpp"
#include "core/link_settings.hpp"

int main(int argc, char** argv) {
  CLI::App app{"strata-store: a rendezvous store that outlives the ranks"};
  std::string host = "127.0.0.1";
  int port = 29500;
  app.add_option("--host", host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "port to listen on (0: any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  CLI11_PARSE(app, argc, argv);
  // Blocked before the server's thread starts, so only sigwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    const auto secret = strata::detail::configured_secret();
    if (!secret)
      std::fprintf(stderr, "strata-store: warning: no STRATA_JOB_SECRET(_FILE): anyone who reaches %s can read "
                           "and write its keys\n", host.c_str());
    strata::bootstrap::StoreServer server(host, static_cast<std::uint16_t>(port),
                                          secret.value_or(strata::bootstrap::JobSecret{}));
    std::printf("strata-store: serving on %s:%u\n", host.c_str(), static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    std::printf("strata-store: stopping (signal %d)\n", sig);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-store: %s\n", e.what());
    return 1;
  }
}
