// strata-plan's number formatting and the element count of a benchmark size, shared by
// its tables (strata_plan.cpp) and its comparison with measured runs (plan_measured.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/types.hpp"

namespace strata::plan_tool {

std::string seconds(double s);       // "12.3 us", "4.56 ms", "1.23 s"
std::string bytes_str(std::uint64_t b);  // "64 KiB"; "inf" for UINT64_MAX
std::string us(double s);            // microseconds, one decimal, no unit
// The count a call of `bytes` (nccl-tests' size) passes, in f32 elements.
std::size_t count_of(CollectiveKind k, std::uint64_t bytes, int p);

}  // namespace strata::plan_tool
