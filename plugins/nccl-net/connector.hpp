// The connect side of connection setup, advanced one non-blocking step per NCCL connect
// call: open the streams (one for a peer in the same region, STRATA_WAN_STREAMS for a
// peer in another), wait for each to connect, write each hello (striped: naming the port
// where broken streams are redialled, stream_rejoin.hpp), then hand over a SendComm
// or, for a same-region peer over UCX, read the listener's worker address first
// (ucx_handshake.hpp) and hand over a UcxSendComm. Each hello goes as the proof of the
// job's handshake (auth_step.hpp), so the listener knows it comes from the job; with
// STRATA_WAN_TLS=1 a striped stream then runs the TLS handshake as client (wire.hpp). Any
// step fails once STRATA_NET_CONNECT_TIMEOUT_S has passed.
//
// NCCL re-calls connect with the same handle buffer until it gets a comm. The handle's
// connect_id field names this side's Connector in a process-wide table; an id rather
// than a pointer, so a stale or forged handle finds nothing instead of wild memory.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "auth_step.hpp"
#include "config.hpp"
#include "devices.hpp"
#include "handle.hpp"
#include "send_comm.hpp"
#include "socket.hpp"
#include "stream_rejoin.hpp"
#include "ucx_handshake.hpp"
#include "wire.hpp"

namespace strata::nccl_net {

class Connector {
 public:
  Connector(const ListenHandle& handle, const Config& config);
  // The comm once the connection is set up; null until then.
  TransferCommPtr step();
  std::uint64_t nonce() const { return nonce_; }

 private:
  TransferCommPtr dial();
  void check_deadline() const;  // throws once STRATA_NET_CONNECT_TIMEOUT_S has passed
  struct Out {
    Wire wire;
    bool connected = false;
    Hello hello{};
    std::unique_ptr<DialAuth> auth;  // once connected: proves the job's secret, the hello as payload
    bool proven = false;
    bool ready = false;  // proven, and with TLS, its handshake done
  };
  bool advance(Out& o);
  std::uint64_t nonce_;
  sockaddr_storage addr_{};
  LinkOptions opt_;
  std::string peer_;
  std::vector<Out> streams_;
  bool ucx_ = false;
  std::unique_ptr<UcxDial> dial_;  // once the hello is written, UCX path only
  RejoinListener rejoins_;         // striped: where the receiver redials a broken stream
  std::chrono::steady_clock::time_point deadline_;
};

// Runs one connect step for `handle`, creating or finishing its Connector.
TransferCommPtr connect_step(ListenHandle& handle, const Config& config);

}  // namespace strata::nccl_net
