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


// ---- Folding a group onto a power of two (recursive doubling, halving-doubling) ----
// With p2 = pow2_floor(p) and rem = p - p2, the first 2*rem ranks pair up: the even one
// of each pair hands its data to the odd one and sits out the power-of-two phase; the
// rest shift down. Virtual rank v then speaks for the real ranks [fold_first(v),
// fold_first(v + 1)), one or two of them, always contiguous, so a virtual block of a
// reduce-scatter or allgather is a contiguous run of the ranks' blocks.
inline int fold_rem(int p) { return p - pow2_floor(p); }
// Virtual rank among the p2 survivors, or -1 for a rank that sits out.
inline int fold_vrank(int me, int p) {
  const int rem = fold_rem(p);
  if (me < 2 * rem) return me % 2 == 1 ? me / 2 : -1;
  return me - rem;
}
// The real rank that carries virtual rank vr.
inline int fold_real(int vr, int p) {
  const int rem = fold_rem(p);
  return vr < rem ? 2 * vr + 1 : vr + rem;
}
inline int fold_first(int vr, int p) {
  const int rem = fold_rem(p);
  return vr < rem ? 2 * vr : vr + rem;
}
// The other rank of a folded pair, or -1 for a rank that is not paired.
inline int fold_partner(int me, int p) { return me < 2 * fold_rem(p) ? (me ^ 1) : -1; }

inline int log2_floor(int v) {
  int k = 0;
  while ((2 << k) <= v) ++k;
  return k;
}

// A half-open run of virtual blocks.
struct BlockRange {
  int begin = 0;
  int end = 0;
  bool operator==(const BlockRange&) const = default;
};

// Recursive halving over p2 (a power of two) virtual ranks and p2 blocks, step k = 0 ..
// log2(p2) - 1. The distance halves each step (p2/2 first), so after the last step
// virtual rank vr holds exactly block vr, fully reduced. At step k a rank keeps the half
// of its current run that contains its own block and sends the other half, which is the
// half its partner keeps: every block moves between exactly one pair per step.
inline int halving_partner(int vr, int k, int p2) { return vr ^ (p2 >> (k + 1)); }
inline BlockRange halving_keep(int vr, int k, int p2) {
  const int half = p2 >> (k + 1);
  const int lo = vr & ~(half - 1);
  return {lo, lo + half};
}
inline BlockRange halving_send(int vr, int k, int p2) {
  return halving_keep(halving_partner(vr, k, p2), k, p2);
}

// Recursive doubling allgather over p2 virtual ranks, step j = 0 .. log2(p2) - 1: before
// step j rank vr holds the aligned run of 2^j blocks around its own; it sends that run to
// vr ^ 2^j and receives the partner's, doubling what it holds.
inline int doubling_partner(int vr, int j) { return vr ^ (1 << j); }
inline BlockRange doubling_held(int vr, int j) {
  const int size = 1 << j;
  const int lo = vr & ~(size - 1);
  return {lo, lo + size};
}

// ---- Binary trees (double binary tree) ----
// The in-order binary tree over positions 1..n: position i with lowest set bit b has
// children i - b/2 and i + b/2, where a right child beyond n is replaced by its leftmost
// descendant within n (i + b/4, i + b/8, ...). Odd positions are the leaves, even ones
// the interior, and the root is the largest power of two not above n; depth is
// about log2 n. Position 0 means "none".
inline int lowest_bit(int i) { return i & -i; }
inline int btree_root(int n) { return pow2_floor(n); }
inline int btree_parent(int i, int n) {
  if (i == btree_root(n)) return 0;
  // The nearest ancestor of i in the infinite tree that lies within n.
  int q = i, b = lowest_bit(i);
  do {
    q = (q & (2 * b)) ? q - b : q + b;
    b *= 2;
  } while (q > n);
  return q;
}
inline int btree_left(int i) {
  const int b = lowest_bit(i);
  return b == 1 ? 0 : i - b / 2;
}
inline int btree_right(int i, int n) {
  for (int h = lowest_bit(i) / 2; h >= 1; h /= 2)
    if (i + h <= n) return i + h;
  return 0;
}

// Two trees over group indices 0..p-1 whose interiors are disjoint (NCCL's double binary
// tree idea): tree 0 puts index r at position r + 1, so odd indices are interior; tree 1
// mirrors (p even: position p - r) or shifts (p odd: position r, index 0 at p), so its
// interior nodes are even indices. Each rank forwards for at most one tree, which is
// what lets the two halves of the data each use the full bandwidth of every link.
inline int dtree_pos(int r, int t, int p) {
  if (t == 0) return r + 1;
  if (p % 2 == 0) return p - r;
  return r == 0 ? p : r;
}
inline int dtree_index(int pos, int t, int p) {
  if (t == 0) return pos - 1;
  if (p % 2 == 0) return p - pos;
  return pos == p ? 0 : pos;
}
// Group index of the parent in tree t, or -1 at the root.
inline int dtree_parent(int r, int t, int p) {
  const int up = btree_parent(dtree_pos(r, t, p), p);
  return up == 0 ? -1 : dtree_index(up, t, p);
}
// Group index of child c (0: left, 1: right) in tree t, or -1.
inline int dtree_child(int r, int t, int c, int p) {
  const int pos = dtree_pos(r, t, p);
  const int ch = c == 0 ? btree_left(pos) : btree_right(pos, p);
  return ch == 0 ? -1 : dtree_index(ch, t, p);
}

// ---- Direct (one-shot scatter-reduce, then gather) ----
// Step k = 1 .. p-1: rank me sends to me + k and receives from me - k, so every rank
// sends to and receives from a different peer at each step and no rank is hit by all
// others at once; the sender of step k sees the same k from the other side.
inline int direct_to(int me, int k, int p) { return mod(me + k, p); }
inline int direct_from(int me, int k, int p) { return mod(me - k, p); }

// Where block s of a vector split among p owners lives (elements): pieces of n, or
// fixed-size blocks (reduce_scatter, allgather) when `fixed` is nonzero.
struct Blocks {
  std::size_t n = 0;  // all blocks together
  int p = 1;
  std::size_t fixed = 0;
  std::size_t begin(int s) const {
    return fixed ? static_cast<std::size_t>(s) * fixed : piece_begin(n, static_cast<std::size_t>(p), static_cast<std::size_t>(s));
  }
  std::size_t size(int s) const {
    return fixed ? fixed : piece_size(n, static_cast<std::size_t>(p), static_cast<std::size_t>(s));
  }
};

}  // namespace strata::collectives
