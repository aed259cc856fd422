#include "hierarchy/hierarchical_allreduce.hpp"

#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "collectives/reduce_kernels.hpp"

namespace strata::hierarchy {

using collectives::Group;

void hierarchical_allreduce(collectives::Context& ctx, const std::vector<Group>& levels,
                            const void* send, void* recv, std::size_t count, DataType dt,
                            ReduceOp op, int world_size) {
  const std::size_t esz = dtype_size(dt);
  // avg is a sum everywhere and one division by the world size at the top, so that the
  // shard's owner divides once and everyone receives the same bits.
  const ReduceOp partial = op == ReduceOp::avg ? ReduceOp::sum : op;
  const char* src = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  struct Range {
    std::size_t off, n;
  };
  std::vector<Range> ranges;  // the range each lower level worked on
  Range cur{0, count};
  for (std::size_t i = 0; i + 1 < levels.size(); ++i) {
    const Group& g = levels[i];
    ranges.push_back(cur);
    collectives::ring_reduce_scatter_pieces(ctx, g, src + cur.off * esz, out + cur.off * esz,
                                            cur.n, dt, partial);
    const auto parts = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
    cur = Range{cur.off + collectives::piece_begin(cur.n, parts, me),
                collectives::piece_size(cur.n, parts, me)};
    src = out;
  }
  collectives::ring_allreduce(ctx, levels.back(), src + cur.off * esz, out + cur.off * esz,
                              cur.n, dt, partial);
  if (op == ReduceOp::avg) collectives::finish_avg(dt, out + cur.off * esz, cur.n, world_size);
  for (std::size_t i = ranges.size(); i-- > 0;)
    collectives::ring_allgather_pieces(ctx, levels[i], out + ranges[i].off * esz, ranges[i].n, dt);
}

}  // namespace strata::hierarchy
