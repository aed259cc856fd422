// libstrata-cuda's kernels (kernel_abi.h), opened at run time like CUDA's driver and NCCL:
// from `path` when given, else beside libstrata itself, else as the loader finds
// libstrata-cuda.so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::device {

struct CudaKernels {
  int (*encode_values)(int coding, const float* x, std::size_t n, std::uint32_t block, int stochastic,
                       std::uint32_t s0, std::uint32_t s1, void* out, void* stream);
  int (*decode_values)(int coding, const void* in, std::size_t n, std::uint32_t block, float* out, int add,
                       void* stream);
};

// The process's, opened by the first call; null with why_no_kernels() saying why.
const CudaKernels* cuda_kernels(const std::string& path = "");
const std::string& why_no_kernels();

}  // namespace strata::device
