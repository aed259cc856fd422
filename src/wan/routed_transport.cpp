#include "wan/routed_transport.hpp"

#include <algorithm>

#include "transport/host_segment.hpp"

namespace strata::wan {

RoutedTransport::RoutedTransport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> wan,
                                 std::vector<bool> remote)
    : local_(std::move(local)),
      wan_(std::move(wan)),
      remote_(std::move(remote)),
      name_(std::string(local_->name()) + "+" + wan_->name()) {
  if (auto segment = local_->host_segment()) {
    segment->exclude(remote_);
    use_host_segment(std::move(segment));
  }
}

transport::RequestPtr RoutedTransport::isend(int peer, transport::Tag tag, const void* buf,
                                             std::size_t bytes) {
  return route(peer).isend(peer, tag, buf, bytes);
}

transport::RequestPtr RoutedTransport::irecv(int peer, transport::Tag tag, void* buf,
                                             std::size_t capacity) {
  return route(peer).irecv(peer, tag, buf, capacity);
}

std::string RoutedTransport::trouble() const {
  const std::string a = local_->report().trouble(), b = wan_->report().trouble();
  return a.empty() ? b : b.empty() ? a : a + "; " + b;
}

bool RoutedTransport::progress() {
  const bool a = local_->progress();
  const bool b = wan_->progress();
  return a || b;
}

void RoutedTransport::wait_event(std::chrono::microseconds max) {
  // Neither fabric can wake the other's wait, so sleep in short turns: a message on one
  // fabric waits at most one turn on the other (the transports end sub-millisecond waits
  // on time, see transport/asio_waiter.hpp).
  const auto turn = std::min(max, kTurn);
  if (progress()) return;
  local_->wait_event(turn);
  if (progress()) return;
  wan_->wait_event(turn);
}

void RoutedTransport::abort(const std::string& why) {
  local_->abort(why);
  wan_->abort(why);
}

bool RoutedTransport::aborted() const { return local_->aborted() || wan_->aborted(); }

std::string RoutedTransport::abort_reason() const {
  return local_->aborted() ? local_->abort_reason() : wan_->abort_reason();
}

}  // namespace strata::wan
