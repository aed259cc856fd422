// A listening socket on one device, and the accept side of connection setup: connections
// are accepted as they come, their hellos read piecewise, and the streams of one
// connection (same conn_id) gathered until all K are there; a UCX connection then gets
// the answer of ucx_handshake.hpp. accept() never blocks; it returns null until a whole
// connection is ready.
//
// Every stream first proves the job's secret, its hello being the proof's payload
// (auth_step.hpp). Until it has, nothing says it is a peer at all: a stranger, a port
// scanner and a peer that died mid-handshake look the same, so such a connection is
// dropped (and logged with its address) at any failure or after
// STRATA_NET_CONNECT_TIMEOUT_S, and accept() goes on. accept() fails (rather than waiting
// forever) when a proven connection is still incomplete after that timeout, or when the
// peer runs a plugin without the handshake, or disagrees about STRATA_WAN_TLS.
//
// A striped connection in TLS (kTls) then runs the TLS handshake, as server, on each
// stream as it arrives; one that fails (a certificate the authority did not sign) drops
// the whole connection, logged, and the dialling side reports why.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "comm.hpp"
#include "auth_step.hpp"
#include "config.hpp"
#include "handle.hpp"
#include "socket.hpp"
#include "ucx_handshake.hpp"
#include "wire.hpp"

namespace strata::nccl_net {

class ListenComm final : public Comm {
 public:
  ListenComm(const Device& device, const Config& config);
  const ListenHandle& handle() const { return handle_; }
  TransferCommPtr accept();

 private:
  using Clock = std::chrono::steady_clock;
  struct Incoming {
    Fd fd;
    Clock::time_point deadline;
    AcceptAuth auth{plugin_secret()};
  };
  struct Group {
    std::vector<Wire> streams;
    int arrived = 0;
    Hello first{};
    Clock::time_point deadline;
    std::unique_ptr<UcxAnswer> answer;  // UCX connections, once all streams are here
    bool dropped = false;               // its TLS handshake failed
  };

  // True once `in` is consumed (grouped, or dropped as not ours). Throws when it is ours
  // but from an incompatible plugin build, or broke or stalled part-way through the hello.
  bool take(Incoming& in);
  // The comm once `g` is complete and (UCX) answered or (TLS) shaken hands; null until
  // then, or when it was dropped.
  TransferCommPtr finish(Group& g);
  // Advances the TLS handshakes of the streams that arrived; true once all K are done.
  bool shake_hands(Group& g);
  TransferCommPtr make_tcp_comm(Group& g, const std::string& peer);
  std::string describe_peer(const Group& g) const;

  const Config& config_;
  std::string device_;
  Fd fd_;
  ListenHandle handle_{};
  std::vector<Incoming> incoming_;
  std::map<std::uint64_t, Group> groups_;
};

}  // namespace strata::nccl_net
