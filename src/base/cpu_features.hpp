// The x86 features the kernels dispatch on, read with cpuid and xgetbv: the same answer
// whichever compiler built the library (clang's __builtin_cpu_supports knows no "f16c"),
// and AVX-class features only when the OS saves the YMM registers too.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace strata::cpu {

struct Features {
  bool sse42 = false, popcnt = false, f16c = false, avx2 = false, bmi1 = false;
};

inline Features detect_features() {
  Features f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse42 = c & (1u << 20);
  f.popcnt = c & (1u << 23);
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  bool ymm = false;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm = (lo & 6u) == 6u;  // XMM and YMM state saved on context switches
  }
  f.f16c = avx && ymm && f16c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = avx && ymm && (b & (1u << 5));
    f.bmi1 = b & (1u << 3);
  }
#endif
  return f;
}

inline const Features& features() {
  static const Features f = detect_features();
  return f;
}

}  // namespace strata::cpu
