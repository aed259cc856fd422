// One WAN stream's connection: a TCP socket, inside TLS when the link has a TLS context.
// The link's code reads and writes through it alike either way (Asio's composed reads
// and writes take it as a stream); only the handshake and a last best-effort write differ.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ssl.hpp>

#include "base/asio.hpp"

namespace strata::wan {

class WanSocket {
 public:
  using executor_type = boost::asio::any_io_executor;
  using lowest_layer_type = boost::asio::ip::tcp::socket;

  // tls: null for a plain stream.
  WanSocket(boost::asio::ip::tcp::socket s, boost::asio::ssl::context* tls)
      : ssl_(std::move(s), tls ? *tls : plain_context()), tls_(tls != nullptr) {}
  WanSocket(boost::asio::io_context& io, boost::asio::ssl::context* tls)
      : WanSocket(boost::asio::ip::tcp::socket(io), tls) {}

  executor_type get_executor() { return lowest_layer().get_executor(); }
  lowest_layer_type& lowest_layer() { return ssl_.next_layer(); }
  bool tls() const { return tls_; }
  void close(boost::system::error_code& ec) { lowest_layer().close(ec); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& b, Handler&& h) {
    if (tls_) ssl_.async_read_some(b, std::forward<Handler>(h));
    else lowest_layer().async_read_some(b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& b, Handler&& h) {
    if (tls_) ssl_.async_write_some(b, std::forward<Handler>(h));
    else lowest_layer().async_write_some(b, std::forward<Handler>(h));
  }
  // The TLS handshake (done at once on a plain stream).
  template <class Handler>
  void async_handshake(bool server, Handler&& h) {
    if (!tls_) return boost::asio::post(get_executor(), [h = std::forward<Handler>(h)]() mutable { h(boost::system::error_code()); });
    ssl_.async_handshake(server ? boost::asio::ssl::stream_base::server : boost::asio::ssl::stream_base::client,
                         std::forward<Handler>(h));
  }
  // Writes what fits now without blocking (a goodbye before closing); bytes written.
  std::size_t try_write(std::span<const boost::asio::const_buffer> bufs, boost::system::error_code& ec) {
    lowest_layer().non_blocking(true, ec);
    if (ec) return 0;
    if (!tls_) return lowest_layer().write_some(bufs, ec);
    std::vector<char> joined;
    for (const auto& b : bufs) joined.insert(joined.end(), static_cast<const char*>(b.data()),
                                             static_cast<const char*>(b.data()) + b.size());
    return ssl_.write_some(boost::asio::buffer(joined), ec);
  }

 private:
  static boost::asio::ssl::context& plain_context() {
    static boost::asio::ssl::context ctx(boost::asio::ssl::context::tls);
    return ctx;
  }
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> ssl_;
  bool tls_;
};

}  // namespace strata::wan
