// The one instruction-set dispatch of every kernel family (reduce.hpp, quant.hpp). Each
// family has a portable variant and an AVX2 variant that give identical bits, so ranks on
// different CPUs agree; the process runs the best variant this CPU supports unless a test
// or a benchmark picks another to compare them.
#pragma once

#include <cstdint>

// The AVX2 variants are compiled wherever the target is x86-64 (function-level target
// attributes, so the rest of the library needs no -mavx2) and chosen at run time.
#if defined(__x86_64__)
#define STRATA_KERNELS_AVX2 1
#endif

namespace strata::kernels {

enum class Isa : std::uint8_t { generic, avx2 };

const char* to_string(Isa isa);
// avx2 needs AVX2, F16C, BMI1 and POPCNT, and the OS saving the YMM registers.
bool isa_supported(Isa isa);
Isa active_isa();
// Switches every family to isa and returns the previous one. Throws InvalidArgument if
// the CPU lacks it. Not for use while other threads run kernels.
Isa set_isa(Isa isa);

}  // namespace strata::kernels
