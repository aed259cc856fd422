// Element-wise reduction kernels used by every reducing collective.
//
// Results are bitwise reproducible: for every type and op, reduce(a, b) and reduce(b, a)
// give identical bits, and every instruction-set variant gives the same bits as every
// other. Ranks combine partial results in different pairings and may run on different
// CPUs, yet must all end with the same buffer.
//
// Semantics per type:
//  * f32/f64: IEEE arithmetic in the type itself.
//  * f16/bf16: both operands widen to f32, combine, and round once (nearest even).
//  * integers: sum and prod wrap modulo 2^bits; avg is rejected.
//  * min/max on floats: -0 is smaller than +0, so the pair (+0, -0) has one answer.
//  * NaN: any NaN input, and any NaN produced (inf - inf, 0 * inf), yields the canonical
//    quiet NaN (positive, payload zero) -- including for min and max. Payload and sign
//    propagation rules differ between operand orders and between CPUs, so they are
//    deliberately erased.
//
// Buffers must be aligned to the element size. out may be the same pointer as a or b
// (or both) but must not partially overlap either.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.hpp"
#include "strata/types.hpp"

namespace strata::kernels {

// out[i] = a[i] op b[i] for i < n. avg combines as sum; finish_avg divides afterwards.
// Throws InvalidArgument for an unknown type or op, avg on an integer type, null or
// misaligned buffers, or partial overlap between out and an input.
void reduce(DataType dt, ReduceOp op, void* out, const void* a, const void* b, std::size_t n);

// buf[i] /= nranks, in f32 for f16/bf16 (rounded once). Floating types only; throws
// InvalidArgument for integer types or nranks < 1.
void finish_avg(DataType dt, void* buf, std::size_t n, int nranks);

// The functions above run active_isa()'s variant; these run the one named, so tests prove
// the variants agree and benchmarks compare them.
// Same contracts as above; also throw InvalidArgument if the CPU lacks isa.
void reduce(Isa isa, DataType dt, ReduceOp op, void* out, const void* a, const void* b,
            std::size_t n);
void finish_avg(Isa isa, DataType dt, void* buf, std::size_t n, int nranks);

}  // namespace strata::kernels
