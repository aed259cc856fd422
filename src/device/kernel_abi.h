/* The entry points of libstrata-cuda (device/cuda/): the codecs' CUDA kernels, in C so
 * that the device layer can take them with dlsym (device/cuda_kernels.hpp) and libstrata
 * needs no CUDA to build. Every launcher queues its work on `stream` (a cudaStream_t)
 * and returns the cudaError_t of the launch, 0 on success. Codings and layouts are
 * quant/wire.hpp's, bit for bit: a GPU rank and a CPU rank read each other's bytes. */
#ifndef STRATA_DEVICE_KERNEL_ABI_H_
#define STRATA_DEVICE_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#define STRATA_CUDA_KERNELS_ABI 1

#if defined(__GNUC__)
#define STRATA_KERNEL_API __attribute__((visibility("default")))
#else
#define STRATA_KERNEL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* STRATA_CUDA_KERNELS_ABI of the library. */
STRATA_KERNEL_API int strata_cuda_kernels_abi(void);

/* A value section for n floats of x (device memory) into out (device memory, as many
 * bytes as quant::wire::value_bytes says). coding is quant::ValueCoding (0 f32, 1 fp16,
 * 2 bf16, 3 int8, 4 int4); block: elements per scale for int8/int4 (even for int4);
 * stochastic with seeds s0, s1: kernels::Rounding. */
STRATA_KERNEL_API int strata_cuda_encode_values(int coding, const float* x, size_t n, uint32_t block, int stochastic,
                                                uint32_t s0, uint32_t s1, void* out, void* stream);
/* Its inverse: out[i] = value, or out[i] += value when add. */
STRATA_KERNEL_API int strata_cuda_decode_values(int coding, const void* in, size_t n, uint32_t block, float* out, int add,
                              void* stream);

#ifdef __cplusplus
}
#endif

#endif
