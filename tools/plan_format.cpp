#include "plan_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace strata::plan_tool {

std::string seconds(double s) {
  char b[32];
  if (s < 1e-3)
    std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  else if (s < 1)
    std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  else
    std::snprintf(b, sizeof b, "%.2f s", s);
  return b;
}

std::string bytes_str(std::uint64_t b) {
  if (b == UINT64_MAX) return "inf";
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && i < 4 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    ++i;
  }
  char s[32];
  std::snprintf(s, sizeof s, "%g %s", v, unit[i]);
  return s;
}

std::string us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", s * 1e6);
  return b;
}

std::size_t count_of(CollectiveKind k, std::uint64_t bytes, int p) {
  const std::uint64_t per = (k == CollectiveKind::reduce_scatter || k == CollectiveKind::allgather)
                                ? bytes / static_cast<std::uint64_t>(std::max(p, 1))
                                : bytes;
  return static_cast<std::size_t>(per / sizeof(float));
}

}  // namespace strata::plan_tool
