#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.hpp"

namespace strata::test {

namespace {

double load_float(DataType dt, const unsigned char* p, std::size_t i) {
  switch (dt) {
    case DataType::f32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DataType::f64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case DataType::f16: { std::uint16_t h; std::memcpy(&h, p + 2 * i, 2); return core::f16_to_float(h); }
    default: { std::uint16_t h; std::memcpy(&h, p + 2 * i, 2); return core::bf16_to_float(h); }
  }
}

void store_float(DataType dt, unsigned char* p, std::size_t i, double v) {
  switch (dt) {
    case DataType::f32: { float f = static_cast<float>(v); std::memcpy(p + 4 * i, &f, 4); return; }
    case DataType::f64: std::memcpy(p + 8 * i, &v, 8); return;
    case DataType::f16: { auto h = core::float_to_f16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); return; }
    default: { auto h = core::float_to_bf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); return; }
  }
}

std::int64_t load_int(DataType dt, const unsigned char* p, std::size_t i) {
  switch (dt) {
    case DataType::i8: return static_cast<std::int8_t>(p[i]);
    case DataType::u8: return p[i];
    case DataType::i32: { std::int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    default: { std::int64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
  }
}

// Truncates to the type's width the way the kernels' wrap-around arithmetic does.
std::int64_t wrap(DataType dt, std::uint64_t v) {
  switch (dt) {
    case DataType::i8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DataType::u8: return static_cast<std::uint8_t>(v);
    case DataType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    default: return static_cast<std::int64_t>(v);
  }
}

double unit_roundoff(DataType dt) {
  switch (dt) {
    case DataType::f32: return std::ldexp(1.0, -24);
    case DataType::f64: return std::ldexp(1.0, -53);
    case DataType::f16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -8);
  }
}

}  // namespace

Bytes random_elements(DataType dt, ReduceOp op, std::size_t n, std::uint64_t seed) {
  // splitmix64: every rank regenerates every peer's input to build its reference, so
  // with 8 ranks and 4M elements the generator dominated the multiprocess suites (std's
  // uniform_real_distribution takes a long-double log per draw).
  std::uint64_t state = seed;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  Bytes out(n * dtype_size(dt));
  if (is_floating(dt)) {
    // Products stay near 1 so they neither overflow nor vanish.
    const double lo = op == ReduceOp::prod ? 0.5 : -4.0, width = op == ReduceOp::prod ? 1.0 : 8.0;
    for (std::size_t i = 0; i < n; ++i)
      store_float(dt, out.data(), i, lo + width * (static_cast<double>(next() >> 11) * 0x1.0p-53));
  } else {
    // Full-width random words, wrap-around products included.
    for (std::size_t i = 0; i < out.size(); i += 8) {
      const std::uint64_t w = next();
      std::memcpy(out.data() + i, &w, std::min<std::size_t>(8, out.size() - i));
    }
  }
  return out;
}

Expected reference(DataType dt, ReduceOp op, const std::vector<Bytes>& inputs, std::size_t n) {
  Expected e;
  if (is_floating(dt)) {
    e.value.assign(n, 0.0);
    e.abs_sum.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      double acc = load_float(dt, inputs[0].data(), i);
      double abs = std::fabs(acc);
      for (std::size_t r = 1; r < inputs.size(); ++r) {
        const double x = load_float(dt, inputs[r].data(), i);
        abs += std::fabs(x);
        switch (op) {
          case ReduceOp::sum: case ReduceOp::avg: acc += x; break;
          case ReduceOp::prod: acc *= x; break;
          case ReduceOp::min: acc = std::min(acc, x); break;
          case ReduceOp::max: acc = std::max(acc, x); break;
        }
      }
      if (op == ReduceOp::avg) {
        acc /= static_cast<double>(inputs.size());
        abs /= static_cast<double>(inputs.size());
      }
      if (op == ReduceOp::prod) abs = std::fabs(acc);
      e.value[i] = acc;
      e.abs_sum[i] = abs;
    }
    return e;
  }
  e.exact.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t acc = load_int(dt, inputs[0].data(), i);
    for (std::size_t r = 1; r < inputs.size(); ++r) {
      const std::int64_t x = load_int(dt, inputs[r].data(), i);
      switch (op) {
        case ReduceOp::sum: case ReduceOp::avg:
          acc = wrap(dt, static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(x)); break;
        case ReduceOp::prod:
          acc = wrap(dt, static_cast<std::uint64_t>(acc) * static_cast<std::uint64_t>(x)); break;
        case ReduceOp::min: acc = std::min(acc, x); break;
        case ReduceOp::max: acc = std::max(acc, x); break;
      }
    }
    e.exact[i] = acc;
  }
  return e;
}

std::size_t mismatches(DataType dt, ReduceOp op, const void* got, const Expected& e,
                       std::size_t offset, std::size_t n, int nranks) {
  const auto* p = static_cast<const unsigned char*>(got);
  std::size_t bad = 0;
  if (!is_floating(dt)) {
    for (std::size_t i = 0; i < n; ++i) bad += load_int(dt, p, i) != e.exact[offset + i];
    return bad;
  }
  const double u = unit_roundoff(dt);
  const bool exact = op == ReduceOp::min || op == ReduceOp::max;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = load_float(dt, p, i);
    const double want = e.value[offset + i];
    // The reference is exact in double; the library rounds once per step, and the
    // result is rounded to dt once more.
    const double bound = exact ? 0.0 : 2.0 * (nranks + 1) * u * e.abs_sum[offset + i] + 1e-300;
    if (!(std::fabs(g - want) <= bound)) ++bad;
  }
  return bad;
}

std::uint64_t hash_bytes(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace strata::test
