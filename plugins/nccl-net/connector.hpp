// The connect side of connection setup, advanced one non-blocking step per NCCL connect
// call: open the streams (one for a peer in the same region, STRATA_WAN_STREAMS for a
// peer in another), wait for each to connect, write each hello, then hand over a SendComm.
//
// NCCL re-calls connect with the same handle buffer until it gets a comm. The handle's
// connect_id field names this side's Connector in a process-wide table; an id rather
// than a pointer, so a stale or forged handle finds nothing instead of wild memory.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "config.hpp"
#include "devices.hpp"
#include "handle.hpp"
#include "send_comm.hpp"
#include "socket.hpp"

namespace strata::nccl_net {

class Connector {
 public:
  Connector(const ListenHandle& handle, const Config& config);
  // The comm once every stream is connected and has sent its hello; null until then.
  std::unique_ptr<SendComm> step();
  std::uint64_t nonce() const { return nonce_; }

 private:
  struct Out {
    Fd fd;
    bool connected = false;
    Hello hello{};
    std::size_t written = 0;
  };
  std::uint64_t nonce_;
  sockaddr_storage addr_{};
  LinkOptions opt_;
  std::string peer_;
  std::vector<Out> streams_;
  std::chrono::steady_clock::time_point deadline_;
};

// Runs one connect step for `handle`, creating or finishing its Connector.
std::unique_ptr<SendComm> connect_step(ListenHandle& handle, const Config& config);

}  // namespace strata::nccl_net
