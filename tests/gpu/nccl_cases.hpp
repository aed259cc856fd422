// What strata-nccl-perf asks of NCCL for one collective at one size, and what every rank
// must read back: element counts in nccl-tests' layout, where an in-place call puts its
// input, each rank's input values and the exact expected output. Free of CUDA and NCCL so
// that it is unit-tested on machines without a GPU (test_nccl_cases).
//
// Inputs are small whole numbers stored as f32 (-4..4), so every sum over up to 2^21
// ranks is exact in any order: NCCL's results are compared bit for bit, not within a
// tolerance, and a byte lost or doubled anywhere on the way shows up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::gpu_check {

enum class Coll { all_reduce, all_gather, reduce_scatter, broadcast, sendrecv };

// nccl-tests' names (all_reduce, ...); nullopt for anything else.
std::optional<Coll> parse_coll(std::string_view name);
std::string coll_name(Coll c);
// "all_reduce,all_gather" or "all" (every collective above); throws std::invalid_argument
// naming the word it does not know.
std::vector<Coll> parse_coll_list(std::string_view list);
bool reduces(Coll c);
// sendrecv is not run in place: one buffer both sent from and received into races.
bool has_in_place(Coll c);

// Elements of f32 for one call, as nccl-tests' getCollByteCount lays them out: the size
// column is the whole buffer of all_gather (output) and reduce_scatter (input).
struct Shape {
  std::size_t count = 0;  // the count passed to NCCL
  std::size_t send = 0;   // elements each rank reads
  std::size_t recv = 0;   // elements each rank writes
  std::uint64_t bytes = 0;  // the size column: max(send, recv) * 4
};
Shape shape(Coll c, std::uint64_t size_bytes, int nranks);

// In place, a call's input and output share the output buffer (all_gather: the rank's
// block of it) or the input buffer (reduce_scatter: its output is the rank's block).
// Returns the element offset of the other side within the shared buffer.
std::size_t in_place_offset(Coll c, const Shape& s, int rank);

// The seed of one (collective, size): a stale result of another row cannot pass.
std::uint64_t row_seed(Coll c, std::uint64_t size_bytes);
// Rank r's input element i: a whole number in [-4, 4].
float input_value(std::uint64_t seed, int rank, std::size_t i);
// What `rank` must hold at output element i after the call (broadcast's root is 0;
// sendrecv receives from rank - 1).
float expected_value(Coll c, const Shape& s, std::uint64_t seed, int rank, int nranks, std::size_t i);

}  // namespace strata::gpu_check
