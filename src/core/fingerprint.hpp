// What each rank believes the current collective is. Every collective sends its
// fingerprint to the next rank in the ring and checks the one from the previous rank, so
// any disagreement (kind, type, count, op, root or order) is caught by some rank.
#pragma once

#include <cstdint>
#include <string>

#include "strata/types.hpp"

namespace strata::detail {

struct Fingerprint {
  // count of an alltoallv: the splits differ by rank, so only the receives can check them.
  static constexpr std::uint64_t kUnevenSplits = ~std::uint64_t{0};

  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int32_t root = -1;
  CollectiveKind kind = CollectiveKind::barrier;
  DataType dtype = DataType::u8;
  ReduceOp op = ReduceOp::sum;
  std::uint8_t algorithm = 0;     // forced algorithm's id + 1, 0 when chosen automatically
  std::uint32_t compression = 0;  // hash of the compression spec, 0 when exact
  // 1: on device buffers through NCCL (the device plan or flat NCCL), which every rank
  // must take alike: a rank on host buffers would never join NCCL's collective.
  std::uint32_t on_device = 0;

  bool operator==(const Fingerprint&) const = default;
  // "allreduce #12 (f32 x 1000, sum)"
  std::string describe() const;
};

static_assert(sizeof(Fingerprint) == 32, "fingerprint travels as raw bytes");

}  // namespace strata::detail
