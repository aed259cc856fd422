#include "hierarchy/ring_stage.hpp"

#include <algorithm>

#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"
#include "strata/errors.hpp"

namespace strata::hierarchy {

using namespace collectives;

namespace {
// Reduce-scatter with shift -1 leaves segment `me` with each member, which is also where
// the allgather starts.
constexpr int kShift = -1;
}  // namespace

RingStage::RingStage(Context& ctx, const Group& g, char* buf, std::size_t n, DataType dt,
                     ReduceOp op, Channel ch, int avg_divisor)
    : ctx_(ctx), g_(g), buf_(buf), n_(n), esz_(dtype_size(dt)), dt_(dt), op_(op), ch_(ch),
      avg_divisor_(avg_divisor) {
  if (g.size() == 1 || n == 0) {
    if (avg_divisor > 0) kernels::finish_avg(dt, buf, n, avg_divisor);
    finished_ = true;
    return;
  }
  const auto p = static_cast<std::size_t>(g.size());
  staging_.reset(new char[piece_size(n, p, 0) * esz_]);
}

void RingStage::post_step() {
  const int p = g_.size(), me = g_.me;
  const int next = g_.rank(mod(me + 1, p)), prev = g_.rank(mod(me - 1, p));
  const bool rs = step_ < p - 1;
  const int k = rs ? step_ : step_ - (p - 1);
  const int send_seg = rs ? ring_rs_send_seg(me, kShift, k, p) : ring_ag_send_seg(me, k, p);
  const int recv_seg = rs ? ring_rs_recv_seg(me, kShift, k, p) : ring_ag_recv_seg(me, k, p);
  const auto parts = static_cast<std::size_t>(p);
  auto at = [&](int s) { return buf_ + piece_begin(n_, parts, static_cast<std::size_t>(s)) * esz_; };
  auto len = [&](int s) { return piece_size(n_, parts, static_cast<std::size_t>(s)) * esz_; };
  recv_ = ctx_.recv(prev, ch_, rs ? staging_.get() : at(recv_seg), len(recv_seg));
  sends_.push_back(ctx_.send(next, ch_, at(send_seg), len(send_seg)));
}

void RingStage::poll() {
  const int p = g_.size();
  const int steps = 2 * (p - 1);
  auto all_sent = [&] {
    for (const auto& s : sends_) {
      if (!s->done()) return false;
      if (!s->error().empty()) throw TransportError(ctx_.what() + ": " + s->error());
    }
    return true;
  };
  while (!finished_) {
    if (step_ == steps) {
      finished_ = all_sent();
      return;
    }
    // The allgather receives into segments the reduce-scatter sent from; a send over
    // the WAN link is only done once acknowledged, and until then it may be resent.
    if (!recv_ && step_ == p - 1 && !all_sent()) return;
    if (!recv_) post_step();
    if (!recv_->done()) return;
    if (!recv_->error().empty()) throw TransportError(ctx_.what() + ": " + recv_->error());
    const int seg = step_ < p - 1 ? ring_rs_recv_seg(g_.me, kShift, step_, p)
                                  : ring_ag_recv_seg(g_.me, step_ - (p - 1), p);
    const auto parts = static_cast<std::size_t>(p);
    const std::size_t len = piece_size(n_, parts, static_cast<std::size_t>(seg));
    ctx_.expect_bytes(recv_, len * esz_);
    if (step_ < p - 1) {
      char* dst = buf_ + piece_begin(n_, parts, static_cast<std::size_t>(seg)) * esz_;
      kernels::reduce(dt_, op_, dst, dst, staging_.get(), len);
    }
    recv_.reset();
    ++step_;
    if (step_ == p - 1 && avg_divisor_ > 0)
      kernels::finish_avg(dt_, buf_ + piece_begin(n_, parts, static_cast<std::size_t>(g_.me)) * esz_,
                 piece_size(n_, parts, static_cast<std::size_t>(g_.me)), avg_divisor_);
  }
}

}  // namespace strata::hierarchy
