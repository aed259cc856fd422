// Allreduce (sum) of a float vector across one group with a lossy codec: what crosses
// the group's links is each member's encoding, never its dense vector.
//
// Two ways to exchange them (collectives::EncodedExchange; the context's chooser picks,
// by the cost model where the communicator has one). gather: every member sends its
// encoding to every other and all decode-add the p encodings in member order; one
// round, but P-1 encodings out per member. reduce_scatter: the vector is split into one
// range per member, each encoded on its own; a member receives every encoding of its
// range, reduces it, re-encodes the sum with the same codec (top-k at the same density,
// the same value coding), keeps what that drops as its own residual, and sends the
// re-encoded range back out. A member so sends and receives about 2(P-1)/P encodings of
// its vector whatever P is: traffic does not grow with the number of members (nor does
// the union of everyone's top-k fill in on the way back), for one more round. Two
// members always gather (one exchange). Either way every member decodes the same bytes
// in the same order: the results are bitwise identical.
#pragma once

#include <cstdint>
#include <string_view>

#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"
#include "quant/codec.hpp"
#include "quant/error_feedback.hpp"
#include "strata/compression.hpp"
#include "strata/types.hpp"

namespace strata::quant {

struct CompressedStage {
  const Codec* codec = nullptr;
  ErrorFeedback* feedback = nullptr;  // null: what the codec drops is lost
  std::string_view key;               // the tensor, for feedback
  Shard shard;                        // where buf sits in that tensor
  std::uint64_t seed = 0;             // stochastic rounding; differ per rank and call
  // The same on every member (the chooser's, from expected sizes).
  collectives::EncodedExchange exchange = collectives::EncodedExchange::reduce_scatter;
};

// The vector and codec as the chooser and the cost model weigh them.
collectives::EncodedShape encoded_shape(const Codec& codec, std::size_t n);

// buf holds n floats: this member's input on entry, the group's sum on return.
collectives::Steps compressed_allreduce(collectives::Context& ctx, const collectives::Group& g, float* buf,
                          std::size_t n, const CompressedStage& stage);

// The stage as an allreduce plan runs it: the codec from the option, feedback under the
// option's key when asked for, a seed unique to this call and rank, and op sum or avg
// (avg divides by `avg_divisor` after the exchange, identically on every member), and
// the exchange the context's chooser picks. `sharing`: groups like g crossing the same
// links at once (a split-rail plan's rails), which share their bandwidth.
collectives::Steps compressed_allreduce(collectives::Context& ctx, const collectives::Group& g, float* buf,
                          std::size_t n, const Compression& c, ErrorFeedback* feedback, Shard shard,
                          ReduceOp op, int avg_divisor, double sharing = 1);

// The registry's entry "compressed" (collectives/registry.hpp): a's compression, with
// a.feedback, over g, in place in a.recv (a.send copied there first).
collectives::Steps run_compressed(collectives::Context& ctx, const collectives::Group& g,
                                  const collectives::CollArgs& a);
// Installs run_compressed in the registry; idempotent, thread-safe.
void install_compressed();

}  // namespace strata::quant
