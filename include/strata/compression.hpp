// Lossy compression of the cross-region stage of allreduce, only when asked for: per call
// through CallOptions::compression, or for every allreduce by STRATA_COMPRESS.
#pragma once

#include <string>
#include <string_view>

namespace strata {

struct Compression {
  // none: exact. fp16/bf16: casts. int8/int4: block quantization with a scale per block.
  // topk: the `density` fraction of largest-magnitude elements, values sent as `values`.
  enum class Kind { none, fp16, bf16, int8, int4, topk };
  Kind kind = Kind::none;
  double density = 0.01;     // topk: fraction kept, in (0, 1]
  Kind values = Kind::none;  // topk: how kept values travel (none = f32, or fp16/bf16/int8/int4)
  bool sampled = true;       // topk: O(n) sampled threshold (DGC) instead of exact selection
  bool stochastic = false;   // int8/int4 (also as topk values): stochastic rounding, seeded
                             // per call so every rank reproduces it
  // Keep what compression dropped and add it to the next call with the same key: the
  // sum of what was delivered converges to the sum of the inputs.
  bool error_feedback = true;
  // Names the tensor (e.g. "layer3.weight") for error feedback; the shard a rank holds is
  // part of the residual's identity, so one key per tensor is enough. Required when
  // error_feedback is on and the kind is lossy.
  std::string key;
  // region: only the cross-region stage is compressed (the shard a rank sends over the
  // WAN). everywhere: the whole allreduce runs as one compressed exchange over all ranks,
  // for a communicator whose every link is slow (or that spans no regions at all).
  enum class Scope { region, everywhere };
  Scope scope = Scope::region;

  // "none", "fp16", "int8,stochastic", "topk:0.01", "topk:0.01+int8",
  // "topk:0.001+fp16,exact"; throws InvalidArgument naming the bad token. key,
  // error_feedback and scope keep their defaults.
  static Compression parse(std::string_view spec);
  std::string to_string() const;  // the spec parse() reads
  bool lossy() const { return kind != Kind::none; }
};

}  // namespace strata
