// The accept loop every listener runs (rendezvous store, TCP transport, WAN link): hand
// each new socket to `on_socket`, and survive errors as sys::AcceptTrouble says, so that
// running out of descriptors for a moment does not stop listening for good.
#pragma once

#include <chrono>
#include <utility>

#include "base/asio.hpp"
#include "base/sys_errors.hpp"

namespace strata::net {

// What a listener for `published` binds: that address, or with `any`
// (SocketSettings::bind_any) the wildcard of its family. Listeners publish `published`
// either way.
boost::asio::ip::address bind_address(const boost::asio::ip::address& published, bool any);

// acceptor, retry and trouble must outlive the loop (members of its owner, which closes
// the acceptor and cancels the timer before they go).
template <class OnSocket>
void accept_forever(boost::asio::ip::tcp::acceptor& acceptor, boost::asio::steady_timer& retry,
                    sys::AcceptTrouble& trouble, OnSocket on_socket) {
  acceptor.async_accept([&acceptor, &retry, &trouble, on_socket](boost::system::error_code ec,
                                                                   boost::asio::ip::tcp::socket s) mutable {
    if (!ec) {
      trouble.accepted();
      on_socket(std::move(s));
      return accept_forever(acceptor, retry, trouble, std::move(on_socket));
    }
    switch (trouble.after_error(ec)) {
      case sys::AcceptNext::stop: return;
      case sys::AcceptNext::retry_now: return accept_forever(acceptor, retry, trouble, std::move(on_socket));
      case sys::AcceptNext::retry_later:
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([&acceptor, &retry, &trouble, on_socket](boost::system::error_code e) mutable {
          if (!e) accept_forever(acceptor, retry, trouble, std::move(on_socket));
        });
        return;
    }
  });
}

}  // namespace strata::net
