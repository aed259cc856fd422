#include "collectives/ps_protocol.hpp"

#include <algorithm>
#include <cstdint>

#include "collectives/patterns.hpp"

namespace strata::ps {

using collectives::piece_begin;
using collectives::piece_size;

bool PushHeader::valid() const {
  if (magic != kMagic) return false;
  if (op == Op::close) return true;
  if (op != Op::allreduce && op != Op::reduce_scatter) return false;
  if (static_cast<unsigned>(dtype) >= static_cast<unsigned>(kNumDataTypes) ||
      static_cast<unsigned>(reduce) >= static_cast<unsigned>(kNumReduceOps))
    return false;
  if (reduce == ReduceOp::avg && !is_floating(dtype)) return false;
  // What the server allocates follows from these: bounded like any buffer a caller could
  // pass (communicator.cpp), and chunks no larger than a message the workers would send.
  return chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes &&
         count <= static_cast<std::uint64_t>(PTRDIFF_MAX) / dtype_size(dtype);
}

std::string PushHeader::describe() const {
  if (op == Op::close) return "close";
  return std::string(op == Op::allreduce ? "allreduce" : "reduce_scatter") + " #" + std::to_string(seq) + " (" +
         to_string(dtype) + " x " + std::to_string(count) + ", " + to_string(reduce) + ", chunks of " +
         std::to_string(chunk_bytes) + " B)";
}

Range intersect(Range a, Range b) {
  const std::size_t lo = std::max(a.begin, b.begin), hi = std::min(a.end(), b.end());
  return hi > lo ? Range{lo, hi - lo} : Range{lo, 0};
}

Layout::Layout(const PushHeader& h, int workers, int servers)
    : h_(h), workers_(workers), servers_(servers), esz_(dtype_size(h.dtype)) {}

Range Layout::shard(int server) const {
  const auto S = static_cast<std::size_t>(servers_), j = static_cast<std::size_t>(server);
  return {piece_begin(h_.count, S, j), piece_size(h_.count, S, j)};
}

std::size_t Layout::chunks(int server) const {
  const std::size_t n = shard(server).size;
  return n ? collectives::chunk_count(n, esz_, h_.chunk_bytes) : 0;
}

Range Layout::chunk(int server, std::size_t c) const {
  const Range s = shard(server);
  const std::size_t C = chunks(server);
  return {s.begin + piece_begin(s.size, C, c), piece_size(s.size, C, c)};
}

Range Layout::pull(int worker) const {
  if (h_.op != Op::reduce_scatter) return {0, h_.count};
  const std::size_t block = h_.count / static_cast<std::size_t>(workers_);
  return {static_cast<std::size_t>(worker) * block, block};
}

}  // namespace strata::ps
