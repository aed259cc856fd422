#include "core/any_source.hpp"

#include "transport/tags.hpp"

namespace strata::detail {

std::uint64_t ReceiveOrder::take(int peer) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !any_open_; });
  return next_.at(static_cast<std::size_t>(peer))++;
}

void ReceiveOrder::begin_any() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !any_open_; });
  any_open_ = true;
}

std::uint64_t ReceiveOrder::peek(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  return next_.at(static_cast<std::size_t>(peer));
}

void ReceiveOrder::end_any(int peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (peer >= 0) ++next_.at(static_cast<std::size_t>(peer));
    any_open_ = false;
  }
  cv_.notify_all();
}

AnySourceRecv::AnySourceRecv(transport::Transport& t, std::shared_ptr<ReceiveOrder> order, void* buf,
                             std::size_t bytes, std::shared_ptr<int> source)
    : transport::Request(-1),
      transport_(t),
      order_(std::move(order)),
      buf_(buf),
      bytes_(bytes),
      source_(std::move(source)) {}

AnySourceRecv::~AnySourceRecv() {
  if (!inner_) order_->end_any(-1);
}

bool AnySourceRecv::done() const {
  if (!inner_) {
    if (transport_.aborted()) return true;
    const int n = transport_.size();
    for (int i = 0; i < n && !inner_; ++i) {
      const int peer = (next_probe_ + i) % n;
      const auto seq = order_->peek(peer);
      if (!transport_.probe(peer, transport::p2p_tag(seq))) continue;
      inner_ = transport_.irecv(peer, transport::p2p_tag(seq), buf_, bytes_);
      *source_ = peer;
      order_->end_any(peer);
    }
    next_probe_ = (next_probe_ + 1) % n;
    if (!inner_) return false;
  }
  return inner_->done();
}

const std::string& AnySourceRecv::error() const {
  static const std::string aborted = "the transport was aborted";
  if (!inner_) return transport_.aborted() ? aborted : no_error_;
  return inner_->error();
}

}  // namespace strata::detail
