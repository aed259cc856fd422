// What a Boost.Asio transport (tcp/, and the WAN link in wan/) answers from its endpoint
// alone: its rank, the address it publishes, the abort state and the listener's trouble;
// and how it opens a request.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/asio_endpoint.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

class AsioTransport : public Transport, public LinkReport {
 public:
  int rank() const override { return rank_; }
  std::string address() const { return net_.address(); }  // "ip:port" to publish
  void set_peer_addresses(std::vector<std::string> addrs) { net_.set_peer_addresses(std::move(addrs), size()); }
  bool aborted() const override { return net_.aborted(); }
  std::string abort_reason() const override { return net_.abort_reason(); }
  const LinkReport& report() const override { return *this; }
  std::string trouble() const override { return net_.trouble(); }

 protected:
  // A request for isend or irecv, failed at once when the transport was aborted or the
  // peer's direction has failed (`failed` says why; empty while it works).
  template <class Req>
  std::shared_ptr<Req> new_request(int peer, Tag tag, const void* buf, std::size_t size,
                                   const std::string& failed = {}) const {
    auto r = std::make_shared<Req>(peer, tag, const_cast<void*>(buf), size);
    if (aborted()) r->fail(abort_reason());
    else if (!failed.empty()) r->fail("rank " + std::to_string(peer) + ": " + failed);
    return r;
  }

  AsioTransport(const std::string& who, int rank, const std::string& bind_host, const net::SocketSettings& sockets,
                int socket_buffer = 0)
      : net_(who, rank, bind_host, sockets, socket_buffer), rank_(rank) {}
  // In the base, so built before the transport's sockets and timers and destroyed after
  // them: they live on its io_context.
  AsioEndpoint net_;
  const int rank_;
};

}  // namespace strata::transport
