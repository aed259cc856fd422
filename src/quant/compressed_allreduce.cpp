#include "quant/compressed_allreduce.hpp"

#include <algorithm>
#include <cmath>
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

std::span<const std::byte> received(const Bytes& b, const RequestPtr& r) { return {b.data(), r->bytes()}; }

}  // namespace

collectives::Steps compressed_allreduce(Context& ctx, const Group& g, float* buf, std::size_t n,
                          const CompressedStage& st) {
  const Codec& codec = *st.codec;
  const std::span<float> all(buf, n);
  if (st.feedback) st.feedback->compensate(st.key, st.shard, all);
  const int p = g.size();
  const auto parts = static_cast<std::size_t>(std::max(p, 1));
  // With two members each range is the whole vector: a direct exchange.
  const bool direct = p <= 2;
  auto range = [&](int j) {
    if (direct) return std::span<float>(buf, n);
    const auto b = collectives::piece_begin(n, parts, static_cast<std::size_t>(j));
    return std::span<float>(buf + b, collectives::piece_size(n, parts, static_cast<std::size_t>(j)));
  };
  const int ranges = direct ? 1 : p;

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
  thread_local std::vector<std::uint32_t> kept;
  thread_local std::vector<float> kept_values;
  if (ranges == 1 && decode_sparse(mine[0], kept, kept_values)) {
    // Top-k: the residual is the input but at the k kept elements; no dense decode.
    if (st.feedback) st.feedback->update_sparse(st.key, st.shard, all, kept, kept_values);
  } else if (st.feedback) {
    // Scratch memory instead of a fresh vector: faulting in 4 bytes per element each
    // call costs more than the encoding. No flat algorithm runs while this stage does.
    const std::span<float> decoded(static_cast<float*>(ctx.scratch(0, n * sizeof(float))), n);
    for (int j = 0; j < ranges; ++j) {
      const auto r = range(j);
      decode(mine[static_cast<std::size_t>(j)], decoded.subspan(static_cast<std::size_t>(r.data() - buf), r.size()));
    }
    st.feedback->update(st.key, st.shard, all, decoded);
  }
  if (p == 1) {
    decode(mine[0], all);
    co_return;
  }

  if (direct) {
    const int other = 1 - g.me;
    const std::size_t cap = std::max(codec.max_wire_bytes(n), exact->max_wire_bytes(n));
    auto* theirs = static_cast<std::byte*>(ctx.scratch(1, cap));
    auto rq = ctx.recv(g.rank(other), Channel::data2, theirs, cap);
    auto sq = ctx.send(g.rank(other), Channel::data2, mine[0].data(), mine[0].size());
    co_await ctx.wait(rq, sq);
    // Member order on both sides, so both add the same numbers in the same order.
    const std::span<const std::byte> wires[2] = {mine[0], {theirs, rq->bytes()}};
    decode(wires[g.me == 0 ? 0 : 1], all);
    decode_add(wires[g.me == 0 ? 1 : 0], all);
    co_return;
  }

  // Reduce-scatter: every member's encoding of range j goes to member j.
  const auto own = range(g.me);
  std::vector<Bytes> in(parts);
  std::vector<RequestPtr> recvs(parts), sends;
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    in[static_cast<std::size_t>(m)].resize(std::max(codec.max_wire_bytes(own.size()), exact->max_wire_bytes(own.size())));
    recvs[static_cast<std::size_t>(m)] =
        ctx.recv(g.rank(m), Channel::data2, in[static_cast<std::size_t>(m)].data(), in[static_cast<std::size_t>(m)].size());
    sends.push_back(ctx.send(g.rank(m), Channel::data2, mine[static_cast<std::size_t>(m)].data(),
                             mine[static_cast<std::size_t>(m)].size()));
  }
  for (const auto& r : recvs)
    if (r) co_await ctx.wait(r);
  std::vector<float> sum(own.size(), 0.0f);
  for (int m = 0; m < p; ++m)
    decode_add(m == g.me ? std::span<const std::byte>(mine[static_cast<std::size_t>(m)])
                               : received(in[static_cast<std::size_t>(m)], recvs[static_cast<std::size_t>(m)]),
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
  std::vector<Bytes> out(parts);
  sends.clear();
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    const auto r = range(m);
    out[static_cast<std::size_t>(m)].resize(std::max(codec.max_wire_bytes(r.size()), exact->max_wire_bytes(r.size())));
    recvs[static_cast<std::size_t>(m)] =
        ctx.recv(g.rank(m), Channel::result, out[static_cast<std::size_t>(m)].data(), out[static_cast<std::size_t>(m)].size());
    sends.push_back(ctx.send(g.rank(m), Channel::result, reduced.data(), reduced.size()));
  }
  for (int m = 0; m < p; ++m) {
    if (m == g.me) continue;
    co_await ctx.wait(recvs[static_cast<std::size_t>(m)]);
    decode(received(out[static_cast<std::size_t>(m)], recvs[static_cast<std::size_t>(m)]), range(m));
  }
  co_await ctx.wait_all(sends);
}

collectives::Steps compressed_allreduce(Context& ctx, const Group& g, float* buf, std::size_t n, const Compression& c,
                          ErrorFeedback* feedback, Shard shard, ReduceOp op, int avg_divisor) {
  const auto codec = make_codec(codec_spec(c));
  CompressedStage st;
  st.codec = codec.get();
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
