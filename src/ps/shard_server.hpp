// A dedicated parameter server's work loop (the worker's side is
// collectives/param_server.cpp, the conversation collectives/ps_protocol.hpp). It takes the workers'
// collectives one at a time, in the order they issue them: sums its shard over the
// workers in worker order, so every worker receives the same bits, and sends each worker
// the part of the shard it pulls while later chunks are still arriving.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/ps_protocol.hpp"
#include "strata/server.hpp"
#include "transport/transport.hpp"

namespace strata::ps {

class ShardServer {
 public:
  // index: this server among `servers`; workers are transport ranks 0..workers-1.
  // timeout: how long the rest of one collective may take once a worker started it.
  ShardServer(transport::Transport& t, int workers, int index, int servers, std::chrono::milliseconds timeout);

  // Serves until every worker has closed its communicator. Throws TransportError when a
  // worker disappears, TimeoutError when a collective stalls.
  ServerStats run();

 private:
  void wait_for_headers(std::vector<transport::RequestPtr>& reqs);
  void wait(const std::vector<transport::RequestPtr>& reqs, const std::string& what);
  // Checks the workers called the same collective; empty when they did.
  std::string disagreement() const;
  void serve(const PushHeader& h);   // one collective every worker agreed on
  void refuse(const std::string& why);  // takes every worker's pushes, answers none

  transport::Transport& t_;
  int workers_, index_, servers_;
  std::chrono::milliseconds timeout_;
  std::vector<PushHeader> headers_;  // this collective's, by worker
  std::vector<char> staging_;        // every worker's copy of the shard
  std::vector<Reply> replies_;
  ServerStats stats_;
};

}  // namespace strata::ps
