// Picks the flat algorithm for one collective over one group and runs it: the one the
// call names, else the context's chooser's (the communicator's selector,
// topology/selector.hpp, for the group's links and the message size).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/feedback_store.hpp"
#include "strata/compression.hpp"
#include "strata/types.hpp"

namespace strata::collectives {

struct Algorithm;  // registry.hpp

// alltoall: what goes to and comes from each member of the group, in elements, indexed
// by group index. Shared, so copying the arguments into the engine's queue stays cheap.
struct Splits {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
};

struct CollArgs {
  CollectiveKind kind = CollectiveKind::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // per-rank count, as in the public API
  DataType dtype = DataType::u8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;           // group index
  std::optional<Compression> compression;  // allreduce only; unset or none: exact
  // A registered algorithm the caller asked for (CallOptions::algorithm, checked against
  // the registry before the call was queued); nullptr: the default choice.
  const Algorithm* algorithm = nullptr;
  std::shared_ptr<const Splits> splits;  // alltoall only
  // Compressed allreduce: where the residuals of what the codec dropped are kept (a
  // quant::ErrorFeedback); null: they are lost.
  FeedbackStore* feedback = nullptr;
};

// How the members of a lossy allreduce (quant/compressed_allreduce.hpp) exchange their
// encodings. gather: each sends its whole encoding to every other and all decode the same
// p encodings: one round, but p - 1 encodings out and in per member. reduce_scatter: each
// range goes to its owner, who re-encodes the range's sum and sends it back out: two
// rounds, about 2(p - 1)/p encodings per member whatever p is. With two members both are
// one exchange of one encoding (gather).
enum class EncodedExchange : std::uint8_t { gather, reduce_scatter };
const char* to_string(EncodedExchange e);  // "gather", "reduce_scatter"

// A lossy allreduce's vector and codec as the chooser weighs them; the same on every
// member (expected sizes, never what one member's encoding came to).
struct EncodedShape {
  double dense_bytes = 0;    // the vector, f32
  double encoded_bytes = 0;  // one member's encoding of all of it
  // Encoding a dense byte, and decoding one into a sum, each cost this many of the
  // figures' reduction γ (quant::encoded_shape gives them per codec).
  double encode_passes = 1;
  double decode_passes = 1;
  // Members of other groups crossing the same links at once (a split-rail plan's rails):
  // they share the bandwidth.
  double sharing = 1;
};

// How a call that names no algorithm gets one. The communicator hands its selector down
// in every Context it builds; a context without one uses threshold_chooser().
class Chooser {
 public:
  virtual ~Chooser() = default;
  virtual const Algorithm& choose(const Group& g, const CollArgs& a) const = 0;
  // Without figures: reduce_scatter from three members on, whose traffic does not grow
  // with them.
  virtual EncodedExchange encoded_exchange(const Group& g, const EncodedShape& s) const;
};

// STRATA_SMALL_BYTES's default (core/settings.def; test_config holds them equal): what
// code without a communicator's settings takes as small.
inline constexpr std::size_t kDefaultSmallBytes = 64 << 10;

// The fixed rule the selector replaced (log(p)-step algorithms up to small_bytes, rings
// and chains above): the choice of code that drives the algorithms without a
// communicator (with the default), and strata-plan's baseline (with STRATA_SMALL_BYTES).
const Chooser& threshold_chooser();
const Algorithm& threshold_algorithm(const CollArgs& a, std::size_t small_bytes = kDefaultSmallBytes);

// The one place a call's algorithm is settled: the one it names, checked against the
// group (InvalidArgument naming `what` and the valid ones), else the chooser's.
const Algorithm& resolve_algorithm(const Chooser& chooser, const Group& g, const CollArgs& a,
                                   const std::string& what);

// Runs a over g with resolve_algorithm(ctx.chooser(), ...).
Steps run_collective(Context& ctx, const Group& g, const CollArgs& a);

}  // namespace strata::collectives
