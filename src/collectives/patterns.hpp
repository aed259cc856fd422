// Pure rank and index arithmetic, kept free of I/O so it can be tested for every p.
#pragma once

#include <algorithm>
#include <cstddef>

namespace strata::collectives {

// Splits n items into `parts` contiguous pieces whose sizes differ by at most one; the
// first n % parts pieces get the extra item.
inline std::size_t piece_begin(std::size_t n, std::size_t parts, std::size_t i) {
  return i * (n / parts) + std::min(i, n % parts);
}
inline std::size_t piece_size(std::size_t n, std::size_t parts, std::size_t i) {
  return n / parts + (i < n % parts ? 1 : 0);
}

inline int mod(int a, int p) { return ((a % p) + p) % p; }

// Number of pipeline chunks for segments of at most max_elems elements: every segment
// of one collective uses the same count, so sender and receiver agree chunk by chunk.
inline std::size_t chunk_count(std::size_t max_elems, std::size_t elem_size,
                               std::size_t chunk_bytes) {
  const std::size_t per_chunk = std::max<std::size_t>(1, chunk_bytes / elem_size);
  return std::max<std::size_t>(1, (max_elems + per_chunk - 1) / per_chunk);
}

// Ring reduce-scatter: at step k (0 .. p-2) rank `me` sends segment (me + shift - k) and
// receives segment (me + shift - k - 1); it ends owning segment (me + shift + 1).
inline int ring_rs_send_seg(int me, int shift, int k, int p) { return mod(me + shift - k, p); }
inline int ring_rs_recv_seg(int me, int shift, int k, int p) { return mod(me + shift - k - 1, p); }
inline int ring_rs_final_seg(int me, int shift, int p) { return mod(me + shift + 1, p); }

// Ring allgather starting from owned segment `own`: at step k rank me sends segment
// (own - k) and receives (own - k - 1) from its predecessor.
inline int ring_ag_send_seg(int own, int k, int p) { return mod(own - k, p); }
inline int ring_ag_recv_seg(int own, int k, int p) { return mod(own - k - 1, p); }

// Binomial tree rooted at virtual rank 0: the parent clears the highest set bit.
inline int highest_bit(int v) {
  int h = 1;
  while (h <= v / 2) h <<= 1;
  return h;
}
inline int binomial_parent(int vr) { return vr == 0 ? -1 : vr - highest_bit(vr); }
// Children are vr + 2^j for every 2^j above vr's highest bit, while below p.
inline int binomial_first_child_step(int vr) { return vr == 0 ? 1 : highest_bit(vr) * 2; }

// Largest power of two not above p.
inline int pow2_floor(int p) { return p <= 1 ? 1 : highest_bit(p); }

}  // namespace strata::collectives
