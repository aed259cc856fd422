// strata-server: a dedicated parameter server without the training script, for machines
// that only serve. Reads the same variables as a server started by strata-run --servers:
//
//   STRATA_RANK=0 STRATA_SERVERS=2 STRATA_WORLD_SIZE=8 STRATA_ROOT=10.0.0.1:29500 strata-server
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "strata/server.hpp"

int main() {
  if (!std::getenv("STRATA_ROLE")) ::setenv("STRATA_ROLE", "server", 1);
  try {
    const strata::ServerStats s = strata::serve_from_env();
    std::printf("strata-server: served %llu collectives, %llu bytes pushed, %llu bytes pulled\n",
                static_cast<unsigned long long>(s.operations), static_cast<unsigned long long>(s.bytes_pushed),
                static_cast<unsigned long long>(s.bytes_pulled));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-server: %s\n", e.what());
    return 1;
  }
}
