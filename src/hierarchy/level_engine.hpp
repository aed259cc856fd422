// What runs one level of a hierarchical plan. The plans (split_rail.cpp, leader.cpp) say
// what each level does to which range of the vector; a level's engine says how. Today
// every level runs on the host, through the transport (host_engine: the flat algorithms
// over the level's group); a level that runs elsewhere (NCCL among the GPUs of a region)
// is another engine behind the same calls, and the plans do not change.
//
// Every call is resumable work (collectives::Steps) over this rank's group at the level;
// all members make the same calls in the same order.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"
#include "strata/types.hpp"

namespace strata::hierarchy {

class LevelEngine {
 public:
  virtual ~LevelEngine() = default;
  virtual const char* name() const = 0;

  // A whole collective over g: a level's share of the latency path, a leader's climb and
  // descent.
  virtual collectives::Steps collective(collectives::Context& ctx, const collectives::Group& g,
                                        const collectives::CollArgs& a) const = 0;
  // Over n elements cut into g.size() pieces (collectives::piece_begin): afterwards piece
  // g.me of recv holds the group's reduction (op avg reduces as sum), the others partial
  // sums.
  virtual collectives::Steps reduce_scatter_pieces(collectives::Context& ctx, const collectives::Group& g,
                                                   const void* send, void* recv, std::size_t n, DataType dt,
                                                   ReduceOp op) const = 0;
  // Fills every piece of buf but g.me's from its owner.
  virtual collectives::Steps allgather_pieces(collectives::Context& ctx, const collectives::Group& g, void* buf,
                                              std::size_t n, DataType dt) const = 0;
  // Both of the above in place, on channel `ch`, so that several can be in flight between
  // the same members; with avg_divisor > 0 each member divides its own piece first.
  virtual collectives::Steps allreduce_pieces(collectives::Context& ctx, const collectives::Group& g, void* buf,
                                              std::size_t n, DataType dt, ReduceOp op, collectives::Channel ch,
                                              int avg_divisor) const = 0;
  // Member `from` hands every member its piece of src[0, n); each ends with its own in out.
  virtual collectives::Steps scatter_pieces(collectives::Context& ctx, const collectives::Group& g,
                                            const char* src, char* out, std::size_t n, DataType dt,
                                            int from) const = 0;
  // How many allreduce_pieces this engine can hold in flight at once (an engine that
  // stages each through memory of its own has so many slots); no bound by default.
  virtual std::size_t stages_at_once() const { return static_cast<std::size_t>(-1); }
};

// The host's: the flat algorithms over the transport.
const LevelEngine& host_engine();

// What one call runs its levels with, indexed like Plan::levels, and the memory its
// buffers are in: the plan's own engines on host memory, or a device call's (NCCL inside
// the region, the region level staged through host memory: core/device_call.cpp).
class CallEngines {
 public:
  virtual ~CallEngines() = default;
  virtual const LevelEngine& level(int i) const = 0;
  // A copy between distinct ranges of the call's buffers, ordered before whatever the
  // engines do next.
  virtual void copy(void* dst, const void* src, std::size_t bytes) const = 0;
  // Memory of the call's kind for a plan's intermediate results, kept across calls (the
  // plans' scratch slot 3 on the host).
  virtual void* scratch(collectives::Context& ctx, std::size_t bytes) const = 0;
  // Device memory: the host touches no byte of the buffers itself (no latency path,
  // whose averaging runs on the host), only the engines do.
  virtual bool on_device() const = 0;
};

}  // namespace strata::hierarchy
