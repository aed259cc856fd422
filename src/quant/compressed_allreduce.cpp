#include "quant/compressed_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/patterns.hpp"
#include "collectives/registry.hpp"
#include "kernels/reduce.hpp"
#include "quant/compression.hpp"

namespace strata::quant {

using collectives::Channel;
using collectives::Context;
using collectives::Group;
using collectives::RequestPtr;

namespace {

using Bytes = std::vector<std::byte>;

// What this member's own encodings drop, into its residual: `sent` minus what they
// decode to. Top-k encodings say which elements they kept, so only those are touched;
// a dense one (or a range that fell back to exact) is decoded whole into scratch.
template <typename Range>
void remember_residual(Context& ctx, const CompressedStage& st, float* buf, std::size_t n, const std::vector<Bytes>& mine,
                       const Range& range) {
  const std::span<float> all(buf, n);
  thread_local std::vector<std::uint32_t> kept, part;
  thread_local std::vector<float> kept_values, part_values;
  bool sparse = n <= UINT32_MAX;
  kept.clear();
  kept_values.clear();
  for (std::size_t j = 0; sparse && j < mine.size(); ++j) {
    sparse = decode_sparse(mine[j], part, part_values);
    const auto at = static_cast<std::uint32_t>(range(static_cast<int>(j)).data() - buf);
    for (const std::uint32_t i : part) kept.push_back(i + at);
    kept_values.insert(kept_values.end(), part_values.begin(), part_values.end());
  }
  if (sparse) {
    st.feedback->update_sparse(st.key, st.shard, all, kept, kept_values);
    return;
  }
  // Scratch memory instead of a fresh vector: faulting in 4 bytes per element each call
  // costs more than the encoding. No flat algorithm runs while this stage does.
  const std::span<float> decoded(static_cast<float*>(ctx.scratch(0, n * sizeof(float))), n);
  for (std::size_t j = 0; j < mine.size(); ++j) {
    const auto r = range(static_cast<int>(j));
    decode(mine[j], decoded.subspan(static_cast<std::size_t>(r.data() - buf), r.size()));
  }
  st.feedback->update(st.key, st.shard, all, decoded);
}

}  // namespace

collectives::EncodedShape encoded_shape(const Codec& codec, std::size_t n) {
  collectives::EncodedShape s;
  s.dense_bytes = static_cast<double>(n) * sizeof(float);
  s.encoded_bytes = static_cast<double>(std::min(codec.expected_wire_bytes(n), n * sizeof(float) + kWireHeaderBytes));
  // Passes of the sum kernel's γ (10.5 GB/s), from the codec micro-benchmark
  // (BENCHMARKS.md, Compression codecs): a dense coding encodes at about the sum's rate
  // (3x slower rounding stochastically) and decodes slightly faster; top-k selects at
  // about 4.5 GiB/s, and adding its k elements into a sum touches only those.
  const CodecSpec& spec = codec.spec();
  if (spec.sparsity == Sparsity::topk) {
    s.encode_passes = 2.5;
    s.decode_passes = std::min(1.0, 0.05 + 4 * spec.density);
  } else {
    s.encode_passes = spec.stochastic ? 3 : 1;
    s.decode_passes = 0.7;
  }
  return s;
}

collectives::Steps compressed_allreduce(Context& ctx, const Group& g, float* buf, std::size_t n,
                          const CompressedStage& st) {
  const Codec& codec = *st.codec;
  const std::span<float> all(buf, n);
  if (st.feedback) st.feedback->compensate(st.key, st.shard, all);
  const int p = g.size();
  const auto parts = static_cast<std::size_t>(std::max(p, 1));
  // Gathering (two members always): every member's one encoding of the whole vector.
  const bool gather = p <= 2 || st.exchange == collectives::EncodedExchange::gather;
  auto range = [&](int j) {
    if (gather) return std::span<float>(buf, n);
    const auto b = collectives::piece_begin(n, parts, static_cast<std::size_t>(j));
    return std::span<float>(buf + b, collectives::piece_size(n, parts, static_cast<std::size_t>(j)));
  };
  const int ranges = gather ? 1 : p;

  // Encode, and remember what the encodings reproduce, for the residual and for our own
  // contribution to the sums.
  // A range whose encoding would outgrow the dense vector (top-k at a high density)
  // travels dense and exact instead: cheaper, and nothing is left for the residual.
  static const auto exact = make_codec(CodecSpec{});
  std::vector<Bytes> mine(static_cast<std::size_t>(ranges));
  for (int j = 0; j < ranges; ++j) {
    auto& w = mine[static_cast<std::size_t>(j)];
    codec.encode(range(j), w, st.seed + static_cast<std::uint64_t>(j));
    if (w.size() > exact->expected_wire_bytes(range(j).size())) exact->encode(range(j), w);
  }
  if (st.feedback) remember_residual(ctx, st, buf, n, mine, range);
  if (p == 1) {
    decode(mine[0], all);
    co_return;
  }

  if (gather) {
    // Only touched pages of the receive slots are faulted in: an encoding is mostly far
    // smaller than the dense bound each slot allows.
    const std::size_t cap = std::max(codec.max_wire_bytes(n), exact->max_wire_bytes(n));
    auto* theirs = static_cast<std::byte*>(ctx.scratch(1, cap * (parts - 1)));
    auto slot = [&](int m) { return theirs + cap * static_cast<std::size_t>(m < g.me ? m : m - 1); };
    std::vector<RequestPtr> recvs(parts), sends;
    for (int m = 0; m < p; ++m) {
      if (m == g.me) continue;
      recvs[static_cast<std::size_t>(m)] = ctx.recv(g.rank(m), Channel::data2, slot(m), cap);
      sends.push_back(ctx.send(g.rank(m), Channel::data2, mine[0].data(), mine[0].size()));
    }
    for (const auto& r : recvs)
      if (r) co_await ctx.wait(r);
    // Member order on every member, so all add the same numbers in the same order.
    for (int m = 0; m < p; ++m) {
      const std::span<const std::byte> w =
          m == g.me ? std::span<const std::byte>(mine[0])
                    : std::span<const std::byte>(slot(m), recvs[static_cast<std::size_t>(m)]->bytes());
      if (m == 0)
        decode(w, all);
      else
        decode_add(w, all);
    }
    co_await ctx.wait_all(sends);
    co_return;
  }

  // Reduce-scatter: every member's encoding of range j goes to member j. Receive slots
  // in scratch, not fresh vectors: zeroing and faulting in a dense bound per member each
  // call cost more than the codec.
  const auto own = range(g.me);
  const std::size_t widest = collectives::piece_size(n, parts, 0);
  const std::size_t cap = std::max(codec.max_wire_bytes(widest), exact->max_wire_bytes(widest));
  auto* in = static_cast<std::byte*>(ctx.scratch(1, cap * parts));
  auto* out = static_cast<std::byte*>(ctx.scratch(2, cap * parts));
  auto slot = [&](std::byte* base, int m) { return base + cap * static_cast<std::size_t>(m); };
  std::vector<RequestPtr> recvs(parts), sends;
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    recvs[static_cast<std::size_t>(m)] = ctx.recv(g.rank(m), Channel::data2, slot(in, m), cap);
    sends.push_back(ctx.send(g.rank(m), Channel::data2, mine[static_cast<std::size_t>(m)].data(),
                             mine[static_cast<std::size_t>(m)].size()));
  }
  for (const auto& r : recvs)
    if (r) co_await ctx.wait(r);
  // Slot 0 held the residual's decode, done with by now.
  const std::span<float> sum(static_cast<float*>(ctx.scratch(0, own.size() * sizeof(float))), own.size());
  std::fill(sum.begin(), sum.end(), 0.0f);
  for (int m = 0; m < p; ++m)
    decode_add(m == g.me ? std::span<const std::byte>(mine[static_cast<std::size_t>(m)])
                         : std::span<const std::byte>(slot(in, m), recvs[static_cast<std::size_t>(m)]->bytes()),
               sum);
  co_await ctx.wait_all(sends);

  // The owner re-encodes its range's sum with the call's codec, so what goes back out is
  // no larger than what came in (top-k keeps the range's density of the sum rather than
  // the union of everyone's picks, which fills in as members are added; a dense coding
  // re-quantizes rather than sending f32). What this drops goes into the owner's residual
  // for the range, to be sent with its next input, so over the calls nothing is lost.
  // Everyone, the owner too, decodes these same bytes: the results are bitwise identical.
  Bytes reduced;
  codec.encode(sum, reduced, st.seed ^ 0xD1B54A32D192ED03ull);
  if (reduced.size() > exact->expected_wire_bytes(own.size())) exact->encode(sum, reduced);
  decode(reduced, own);
  if (st.feedback) {
    for (std::size_t i = 0; i < own.size(); ++i) sum[i] -= own[i];
    st.feedback->add(st.key, st.shard, static_cast<std::size_t>(own.data() - buf), sum);
  }
  sends.clear();
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    recvs[static_cast<std::size_t>(m)] = ctx.recv(g.rank(m), Channel::result, slot(out, m), cap);
    sends.push_back(ctx.send(g.rank(m), Channel::result, reduced.data(), reduced.size()));
  }
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    co_await ctx.wait(recvs[static_cast<std::size_t>(m)]);
    decode(std::span<const std::byte>(slot(out, m), recvs[static_cast<std::size_t>(m)]->bytes()), range(m));
  }
  co_await ctx.wait_all(sends);
}

collectives::Steps compressed_allreduce(Context& ctx, const Group& g, float* buf, std::size_t n, const Compression& c,
                          ErrorFeedback* feedback, Shard shard, ReduceOp op, int avg_divisor, double sharing) {
  const auto codec = make_codec(codec_spec(c));
  CompressedStage st;
  st.codec = codec.get();
  collectives::EncodedShape shape = encoded_shape(*codec, n);
  shape.sharing = sharing;
  st.exchange = ctx.chooser().encoded_exchange(g, shape);
  st.feedback = c.error_feedback ? feedback : nullptr;
  st.key = c.key;
  st.shard = shard;
  // Independent rounding noise per rank and per call, yet reproducible run to run.
  st.seed = (ctx.seq() + 1) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(ctx.my_rank()) << 32 ^ shard.offset;
  co_await compressed_allreduce(ctx, g, buf, n, st);
  if (op == ReduceOp::avg) kernels::finish_avg(DataType::f32, buf, n, avg_divisor);
}

collectives::Steps run_compressed(Context& ctx, const Group& g, const collectives::CollArgs& a) {
  float* buf = static_cast<float*>(a.recv);
  if (a.send != a.recv && a.count) std::memcpy(buf, a.send, a.count * sizeof(float));
  co_await compressed_allreduce(ctx, g, buf, a.count, *a.compression, static_cast<ErrorFeedback*>(a.feedback),
                                Shard{0, a.count}, a.op, g.size());
}

void install_compressed() { collectives::install(collectives::AlgorithmId::compressed, run_compressed); }

}  // namespace strata::quant
