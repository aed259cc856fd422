// A ring allreduce that never blocks: poll() posts the next step when the previous one's
// data has arrived. The pipelined plan keeps one per segment in flight across regions,
// so the WAN link always has several segments' traffic queued and its round trips
// overlap with the next segment's intra-region reduce-scatter.
#pragma once

#include <memory>
#include <vector>

#include "collectives/context.hpp"
#include "strata/types.hpp"

namespace strata::hierarchy {

class RingStage {
 public:
  // Reduces buf[0, n) elementwise over g in place; every member ends with the same bits.
  // `ch` must be unique among stages in flight between the same peers. With avg_divisor
  // > 0 each member divides the segment it owns before sharing it (op must then be sum).
  RingStage(collectives::Context& ctx, const collectives::Group& g, char* buf, std::size_t n,
            DataType dt, ReduceOp op, collectives::Channel ch, int avg_divisor = 0);
  RingStage(const RingStage&) = delete;
  RingStage& operator=(const RingStage&) = delete;

  // Advances as far as arrived data allows. Throws on a failed request or a short message.
  void poll();
  bool done() const { return finished_; }

 private:
  void post_step();

  collectives::Context& ctx_;
  const collectives::Group& g_;
  char* buf_;
  std::size_t n_, esz_;
  DataType dt_;
  ReduceOp op_;
  collectives::Channel ch_;
  int avg_divisor_;
  int step_ = 0;  // 0 .. 2(p-1): reduce-scatter steps first, then allgather steps
  collectives::RequestPtr recv_;
  std::vector<collectives::RequestPtr> sends_;
  std::unique_ptr<char[]> staging_;
  bool finished_ = false;
};

}  // namespace strata::hierarchy
