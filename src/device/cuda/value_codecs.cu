// The codecs' value sections on the GPU (device/kernel_abi.h), written to match the CPU's
// (kernels/quant_body.hpp, base/half.hpp) bit for bit: the same integer conversions for
// fp16 and bf16 (NaN payloads included), the same order of float operations for the
// scales and codes, each product and sum rounded on its own (__fmul_rn, __fadd_rn: no
// fused multiply-add, which the CPU code does not use either), the same random draws.
#include <cuda_runtime.h>

#include <cstdint>

#include "device/kernel_abi.h"

namespace {

constexpr int kThreads = 256;
constexpr std::uint32_t kFiniteLimit = 0x7f800000u;
constexpr float kTinyMax = 0x1p-60f;
constexpr std::size_t kStage = 1024;  // the CPU's piece: it keys the stochastic draws

__device__ __forceinline__ std::uint32_t bits(float f) { return __float_as_uint(f); }

// ---- fp16 and bf16, as base/half.hpp -------------------------------------------------

__device__ __forceinline__ std::uint16_t to_f16(float f) {
  const std::uint32_t u = bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t ua = u & 0x7fffffffu;
  const auto a = static_cast<std::int32_t>(ua);
  const std::uint32_t normal = (ua - ((127u - 15u) << 23) + 0xfffu + ((ua >> 13) & 1u)) >> 13;
  const std::uint32_t subnormal = bits(__fadd_rn(__uint_as_float(ua), 0.5f)) - bits(0.5f);
  const std::uint32_t special = a > 0x7f800000 ? (0x7e00u | ((ua >> 13) & 0x3ffu)) : 0x7c00u;
  std::uint32_t r = a < 0x38800000 ? subnormal : normal;
  r = a >= 0x47800000 ? special : r;
  return static_cast<std::uint16_t>(r | sign);
}

__device__ __forceinline__ float from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  const std::uint32_t normal = ((exp + (127u - 15u)) << 23) | (mant << 13);
  const std::uint32_t subnormal = bits(__fmul_rn(static_cast<float>(static_cast<std::int32_t>(mant)), 0x1p-24f));
  const std::uint32_t special = 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  std::uint32_t r = exp == 0 ? subnormal : normal;
  r = exp == 0x1f ? special : r;
  return __uint_as_float(r | sign);
}

__device__ __forceinline__ std::uint16_t to_bf16(float f) {
  const std::uint32_t u = bits(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool is_nan = static_cast<std::int32_t>(u & 0x7fffffffu) > 0x7f800000;
  return static_cast<std::uint16_t>(is_nan ? ((u >> 16) | 0x40u) : rounded);
}

__device__ __forceinline__ float from_bf16(std::uint16_t h) { return __uint_as_float(static_cast<std::uint32_t>(h) << 16); }

// ---- block quantization, as kernels/quant_body.hpp -----------------------------------

__device__ __forceinline__ std::uint32_t mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

__device__ __forceinline__ float uniform(std::uint32_t s0, std::uint32_t s1, std::uint32_t i) {
  return __fmul_rn(static_cast<float>(mix32((i ^ s0) * 0x9e3779b1u + s1) >> 8), 0x1p-24f);
}

__device__ __forceinline__ float clamp_q(float v, float qmax) {
  v = v >= -qmax ? v : -qmax;
  return v <= qmax ? v : qmax;
}

struct Rounding {
  bool stochastic;
  std::uint32_t s0, s1;
};

// The code of the element at stream position p of the block starting at `base` whose
// largest magnitude key is mk. The CPU keys a draw by the start of its 1024-element piece
// (`first`, folded to 32 bits) plus the offset in it.
template <int kMax>
__device__ __forceinline__ std::int32_t code_of(float x, std::size_t p, std::size_t base, std::uint32_t mk,
                                                const Rounding& r) {
  constexpr float qmax = static_cast<float>(kMax);
  if (mk >= kFiniteLimit || mk == 0) return 0;
  const std::size_t first = base + (p - base) / kStage * kStage;
  const auto idx = static_cast<std::uint32_t>(first ^ (static_cast<std::uint64_t>(first) >> 32));
  const auto draw = idx + static_cast<std::uint32_t>(p - first);
  const float amax = __uint_as_float(mk);
  if (amax < kTinyMax) {
    const float scale = __fdiv_rn(amax, qmax);
    if (r.stochastic) return static_cast<std::int32_t>(floorf(clamp_q(__fadd_rn(__fdiv_rn(x, scale), uniform(r.s0, r.s1, draw)), qmax)));
    return static_cast<std::int32_t>(rintf(clamp_q(__fdiv_rn(x, scale), qmax)));
  }
  const float inv = __fdiv_rn(qmax, amax);
  if (r.stochastic) {
    const float v = __fadd_rn(__fmul_rn(x, inv), uniform(r.s0, r.s1, draw));
    const auto q = static_cast<std::int32_t>(floorf(v));
    return q < -kMax ? -kMax : q > kMax ? kMax : q;
  }
  return static_cast<std::int32_t>(rintf(__fmul_rn(x, inv)));
}

__device__ __forceinline__ float scale_of(std::uint32_t mk, float qmax) {
  if (mk >= kFiniteLimit) return __uint_as_float(0x7fc00000u);
  return __fdiv_rn(__uint_as_float(mk), qmax);
}

// The largest magnitude key of x[base, base + len), in every thread of the block.
__device__ std::uint32_t block_max_key(const float* x, std::size_t base, std::size_t len) {
  __shared__ std::uint32_t warp_max[kThreads / 32];
  std::uint32_t mk = 0;
  for (std::size_t j = threadIdx.x; j < len; j += blockDim.x) mk = max(mk, bits(x[base + j]) & 0x7fffffffu);
  for (int o = 16; o > 0; o >>= 1) mk = max(mk, __shfl_xor_sync(0xffffffffu, mk, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = mk;
  __syncthreads();
  mk = 0;
  for (int w = 0; w < kThreads / 32; ++w) mk = max(mk, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next quantization block
  return mk;
}

// One CUDA block per quantization block (grid-strided); scales then codes, as wire.hpp.
__global__ void quantize_int8(const float* x, std::size_t n, std::size_t block, Rounding r, float* scales,
                              std::int8_t* codes) {
  const std::size_t nblocks = (n + block - 1) / block;
  for (std::size_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
    const std::size_t base = b * block, len = min(block, n - base);
    const std::uint32_t mk = block_max_key(x, base, len);
    if (threadIdx.x == 0) scales[b] = scale_of(mk, 127.f);
    for (std::size_t j = threadIdx.x; j < len; j += blockDim.x)
      codes[base + j] = static_cast<std::int8_t>(code_of<127>(x[base + j], base + j, base, mk, r));
  }
}

__global__ void quantize_int4(const float* x, std::size_t n, std::size_t block, Rounding r, float* scales,
                              std::uint8_t* codes) {
  const std::size_t nblocks = (n + block - 1) / block;
  for (std::size_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
    const std::size_t base = b * block, len = min(block, n - base);  // base is even: block is
    const std::uint32_t mk = block_max_key(x, base, len);
    if (threadIdx.x == 0) scales[b] = scale_of(mk, 7.f);
    for (std::size_t j = 2 * threadIdx.x; j < len; j += 2 * blockDim.x) {
      const std::int32_t lo = code_of<7>(x[base + j], base + j, base, mk, r);
      const std::int32_t hi = j + 1 < len ? code_of<7>(x[base + j + 1], base + j + 1, base, mk, r) : 0;
      codes[(base + j) / 2] = static_cast<std::uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
    }
  }
}

template <bool kAdd>
__device__ __forceinline__ void put(float* o, float v) {
  if constexpr (kAdd) {
    *o = __fadd_rn(*o, v);
  } else {
    *o = v;
  }
}

template <bool kAdd>
__global__ void dequantize_int8(const float* scales, const std::int8_t* codes, std::size_t n, std::size_t block,
                                float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    put<kAdd>(out + i, __fmul_rn(static_cast<float>(codes[i]), scales[i / block]));
}

template <bool kAdd>
__global__ void dequantize_int4(const float* scales, const std::uint8_t* codes, std::size_t n, std::size_t block,
                                float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint8_t byte = codes[i / 2];
    // Shifting a nibble to the top of a byte and back sign-extends it.
    const std::int32_t c = i % 2 == 0 ? static_cast<std::int8_t>(static_cast<std::uint8_t>(byte << 4)) >> 4
                                      : static_cast<std::int8_t>(byte) >> 4;
    put<kAdd>(out + i, __fmul_rn(static_cast<float>(c), scales[i / block]));
  }
}

__global__ void encode_half(const float* x, std::size_t n, bool bf, std::uint16_t* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = bf ? to_bf16(x[i]) : to_f16(x[i]);
}

template <bool kAdd>
__global__ void decode_half(const std::uint16_t* in, std::size_t n, bool bf, float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    put<kAdd>(out + i, bf ? from_bf16(in[i]) : from_f16(in[i]));
}

template <bool kAdd>
__global__ void decode_f32(const float* in, std::size_t n, float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    put<kAdd>(out + i, in[i]);
}

unsigned grid_for(std::size_t items) {
  const std::size_t g = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 65535 * 32 ? (g ? g : 1) : 65535 * 32);
}

std::size_t scale_bytes(std::size_t n, std::size_t block) { return n ? 4 * ((n - 1) / block + 1) : 0; }

}  // namespace

extern "C" int strata_cuda_kernels_abi(void) { return STRATA_CUDA_KERNELS_ABI; }

extern "C" int strata_cuda_encode_values(int coding, const float* x, size_t n, uint32_t block, int stochastic,
                                         uint32_t s0, uint32_t s1, void* out, void* stream) {
  if (n == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  auto* o = static_cast<char*>(out);
  const Rounding r{stochastic != 0, s0, s1};
  switch (coding) {
    case 0: return cudaMemcpyAsync(out, x, 4 * n, cudaMemcpyDeviceToDevice, s);
    case 1:
    case 2: encode_half<<<grid_for(n), kThreads, 0, s>>>(x, n, coding == 2, reinterpret_cast<std::uint16_t*>(o)); break;
    case 3:
      quantize_int8<<<grid_for((n + block - 1) / block * kThreads), kThreads, 0, s>>>(
          x, n, block, r, reinterpret_cast<float*>(o), reinterpret_cast<std::int8_t*>(o + scale_bytes(n, block)));
      break;
    case 4:
      if (block % 2) return cudaErrorInvalidValue;
      quantize_int4<<<grid_for((n + block - 1) / block * kThreads), kThreads, 0, s>>>(
          x, n, block, r, reinterpret_cast<float*>(o), reinterpret_cast<std::uint8_t*>(o + scale_bytes(n, block)));
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" int strata_cuda_decode_values(int coding, const void* in, size_t n, uint32_t block, float* out, int add,
                                         void* stream) {
  if (n == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  const auto* i = static_cast<const char*>(in);
  const unsigned g = grid_for(n);
  const auto* scales = reinterpret_cast<const float*>(i);
  switch (coding) {
    case 0:
      if (!add) return cudaMemcpyAsync(out, in, 4 * n, cudaMemcpyDeviceToDevice, s);
      decode_f32<true><<<g, kThreads, 0, s>>>(reinterpret_cast<const float*>(i), n, out);
      break;
    case 1:
    case 2:
      if (add)
        decode_half<true><<<g, kThreads, 0, s>>>(reinterpret_cast<const std::uint16_t*>(i), n, coding == 2, out);
      else
        decode_half<false><<<g, kThreads, 0, s>>>(reinterpret_cast<const std::uint16_t*>(i), n, coding == 2, out);
      break;
    case 3: {
      const auto* c = reinterpret_cast<const std::int8_t*>(i + scale_bytes(n, block));
      if (add)
        dequantize_int8<true><<<g, kThreads, 0, s>>>(scales, c, n, block, out);
      else
        dequantize_int8<false><<<g, kThreads, 0, s>>>(scales, c, n, block, out);
      break;
    }
    case 4: {
      const auto* c = reinterpret_cast<const std::uint8_t*>(i + scale_bytes(n, block));
      if (add)
        dequantize_int4<true><<<g, kThreads, 0, s>>>(scales, c, n, block, out);
      else
        dequantize_int4<false><<<g, kThreads, 0, s>>>(scales, c, n, block, out);
      break;
    }
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
