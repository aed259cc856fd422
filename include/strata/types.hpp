// Element types, reduction operations and collective kinds shared by the C++ API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class DataType : std::uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64 };
inline constexpr int kNumDataTypes = 8;

// avg is only defined for floating types; f16 and bf16 reduce in f32 and round once.
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };
inline constexpr int kNumReduceOps = 5;

enum class CollectiveKind : std::uint8_t {
  allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, send, recv, alltoall
};

std::size_t dtype_size(DataType t);
bool is_floating(DataType t);
const char* to_string(DataType t);
const char* to_string(ReduceOp op);
const char* to_string(CollectiveKind k);

// Accepts the names printed by to_string plus the nccl-tests spellings
// ("float", "double", "half", "bfloat16", "int8", "uint8", "int32", "int64").
std::optional<DataType> parse_dtype(std::string_view name);
std::optional<ReduceOp> parse_op(std::string_view name);

}  // namespace strata
