#include "strata/types.hpp"

#include <array>
#include <string>

#include "strata/errors.hpp"

namespace strata {
namespace {

struct DtypeInfo {
  const char* name;
  const char* nccl_name;  // spelling used by nccl-tests' -d option and its result tables
  std::size_t size;
  bool floating;
};

// Indexed by the enumerator value, so the order must follow DataType.
constexpr std::array<DtypeInfo, kNumDataTypes> kDtypes{{
    {"f32", "float", 4, true},
    {"f64", "double", 8, true},
    {"f16", "half", 2, true},
    {"bf16", "bfloat16", 2, true},
    {"i8", "int8", 1, false},
    {"u8", "uint8", 1, false},
    {"i32", "int32", 4, false},
    {"i64", "int64", 8, false},
}};

constexpr std::array<const char*, kNumReduceOps> kOps{"sum", "prod", "min", "max", "avg"};

constexpr std::array<const char*, 9> kCollectives{
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "barrier", "send", "recv", "alltoall"};

// Enumerators can arrive from the C ABI as arbitrary integers; never index blindly.
const DtypeInfo* info(DataType t) {
  const auto i = static_cast<std::size_t>(t);
  return i < kDtypes.size() ? &kDtypes[i] : nullptr;
}

}  // namespace

std::size_t dtype_size(DataType t) {
  if (const DtypeInfo* d = info(t)) return d->size;
  // A size of 0 would silently turn every byte count into nothing; fail loudly instead.
  throw InvalidArgument("unknown data type " + std::to_string(static_cast<int>(t)));
}

bool is_floating(DataType t) {
  const DtypeInfo* d = info(t);
  return d != nullptr && d->floating;
}

const char* to_string(DataType t) {
  const DtypeInfo* d = info(t);
  return d != nullptr ? d->name : "unknown";
}

const char* to_string(ReduceOp op) {
  const auto i = static_cast<std::size_t>(op);
  return i < kOps.size() ? kOps[i] : "unknown";
}

const char* to_string(CollectiveKind k) {
  const auto i = static_cast<std::size_t>(k);
  return i < kCollectives.size() ? kCollectives[i] : "unknown";
}

std::optional<DataType> parse_dtype(std::string_view name) {
  for (std::size_t i = 0; i < kDtypes.size(); ++i) {
    if (name == kDtypes[i].name || name == kDtypes[i].nccl_name) {
      return static_cast<DataType>(i);
    }
  }
  return std::nullopt;
}

std::optional<ReduceOp> parse_op(std::string_view name) {
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    if (name == kOps[i]) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

}  // namespace strata
