// strata-perf's correctness check (-c): what every rank puts in its input buffers, and
// how many elements of an output differ from what the collective must produce.
//
// Inputs are small integers, so every sum, min, max and product is exact in every type
// (f16 and bf16 included) and the expected result can be computed locally without
// depending on the order in which ranks combine. Integer sums that overflow wrap, and the
// expectation wraps the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/types.hpp"

namespace strata::perf {

// nccl-tests' spelling of a type, as printed in the "type" column.
const char* nccl_type_name(DataType dt);
// The types and ops that "-d all" and "-o all" expand to, in nccl-tests' order.
std::vector<DataType> all_dtypes();
std::vector<ReduceOp> all_ops();
// Whether strata defines op on dt (avg needs a floating type).
bool op_supported(ReduceOp op, DataType dt);

class Pattern {
 public:
  // seed varies the values between check iterations.
  Pattern(int nranks, ReduceOp op, int seed);

  // What `rank` contributes at global element index `index`.
  std::int64_t value(int rank, std::size_t index) const;
  // op applied over every rank's value at `index`, before any rounding to the type
  // (avg is returned as the sum; the division happens in the check).
  std::int64_t combined(std::size_t index) const;

  int nranks() const { return nranks_; }
  ReduceOp op() const { return op_; }

 private:
  int nranks_;
  ReduceOp op_;
  int seed_;
  int max_value_;    // values lie in [0, max_value_] for sum, min, max and avg
  int prod_period_;  // prod: at most one rank contributes a 2 at any index
};

// Writes value(rank, first + i) for i < count into buf, in type dt.
void fill(void* buf, DataType dt, std::size_t count, const Pattern& p, int rank, std::size_t first);

// What element i of an output must hold.
struct Expect {
  enum class Kind {
    reduced,    // p.combined(first + i) (divided by nranks for avg)
    from_rank,  // p.value(rank, first + i)
    gathered,   // p.value(i / block, i % block)
    exchanged,  // p.value(i / block, first + i % block): block j came from rank j (alltoall)
  };
  Kind kind = Kind::reduced;
  std::size_t first = 0;
  int rank = 0;
  std::size_t block = 1;
};

// Counts elements of buf[0, count) that differ from the expectation. Exact comparison,
// except avg, which allows the rounding of one division in the type.
std::int64_t count_wrong(const void* buf, DataType dt, std::size_t count, const Pattern& p,
                         const Expect& e);

}  // namespace strata::perf
