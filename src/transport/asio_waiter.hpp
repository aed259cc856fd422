// How an Asio-based transport sleeps in wait_event. io_context::run_one_for hands its
// timeout to epoll in whole milliseconds, rounding 100 µs up to 1 ms; a caller that
// alternates between two fabrics in short turns (wan::RoutedTransport) would then leave
// the other fabric's messages unnoticed for a millisecond per turn, which across a fast
// WAN link was most of a small collective's time. An armed timer (a timerfd) ends the
// wait on time instead.
#pragma once

#include <chrono>

#include "base/asio.hpp"

namespace strata::transport {

class AsioWaiter {
 public:
  explicit AsioWaiter(boost::asio::io_context& io) : io_(io), timer_(io) {}

  // Runs at most one handler, waiting at most about `max` for one to be ready.
  void run_one_for(std::chrono::microseconds max) {
    if (io_.stopped()) io_.restart();
    if (max < std::chrono::milliseconds(1) && !armed_) {
      // A timer left armed by an earlier wait that ended sooner still ends this one
      // no later than its own expiry, which is soon.
      armed_ = true;
      timer_.expires_after(max);
      timer_.async_wait([this](const boost::system::error_code&) { armed_ = false; });
    }
    io_.run_one_for(max);
  }

 private:
  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  bool armed_ = false;
};

}  // namespace strata::transport
