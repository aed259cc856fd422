#include "kernels/isa.hpp"

#include <atomic>
#include <string>

#include "base/cpu_features.hpp"
#include "strata/errors.hpp"

namespace strata::kernels {
namespace {

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{isa_supported(Isa::avx2) ? Isa::avx2 : Isa::generic};
  return isa;
}

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::generic: return "generic";
    case Isa::avx2: return "avx2";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::generic: return true;
    case Isa::avx2: {
#ifdef STRATA_KERNELS_AVX2
      const cpu::Features& f = cpu::features();
      return f.avx2 && f.f16c && f.bmi1 && f.popcnt;
#else
      return false;
#endif
    }
  }
  return false;
}

Isa active_isa() { return current().load(std::memory_order_relaxed); }

Isa set_isa(Isa isa) {
  if (!isa_supported(isa))
    throw InvalidArgument(std::string("kernels: this CPU does not support the ") + to_string(isa) + " variant");
  return current().exchange(isa, std::memory_order_relaxed);
}

}  // namespace strata::kernels
