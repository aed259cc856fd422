// Dedicated parameter servers: processes that take no part in training but hold one
// shard of every vector the workers allreduce with the param_server algorithm, sum the
// workers' pushes and serve their pulls. Workers see an ordinary Communicator of the
// workers alone; they only need STRATA_SERVERS to say how many servers to wait for.
//
//   strata-run -n 4 --servers 2 ./train   # 4 workers, 2 servers (same binary, STRATA_ROLE=server)
//
// A server process is started with STRATA_ROLE=server, STRATA_RANK = its index among the
// servers, STRATA_SERVERS, STRATA_WORLD_SIZE = the number of workers and STRATA_ROOT.
// One program can play both roles, as with BytePS:
//
//   if (strata::is_server_process()) { strata::serve_from_env(); return 0; }
//   auto comm = strata::Communicator::from_env();
//
// (Communicator::from_env in a server process throws InvalidArgument saying so.)
#pragma once

#include <cstdint>
#include <string>

#include "strata/options.hpp"

namespace strata {

struct ServerStats {
  std::uint64_t operations = 0;    // collectives served
  std::uint64_t bytes_pushed = 0;  // received from workers
  std::uint64_t bytes_pulled = 0;  // sent to workers
};

struct ServerOptions {
  int index = 0;    // this server among `servers`
  int servers = 1;  // all dedicated servers (the workers' STRATA_SERVERS)
  int workers = 1;  // the workers' communicator size
  std::string root; // host:port of the rendezvous, served by worker 0
  CommOptions comm; // transport and timeout, as the workers'
};

// Joins the workers' rendezvous and serves until every worker closed its communicator.
// Throws like communicator creation (InvalidArgument, TimeoutError) and TransportError
// when a worker disappears mid-run.
ServerStats serve(const ServerOptions& options);

// The same from the launcher's environment (see above).
ServerStats serve_from_env(const CommOptions& comm = {});

// Whether STRATA_ROLE says this process is a dedicated server.
bool is_server_process();

}  // namespace strata
