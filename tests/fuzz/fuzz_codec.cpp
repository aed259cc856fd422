// Compressed buffers as a rank receives them from another region: any bytes are decoded
// (dense, accumulate and sparse) into outputs sized from the validated header. A buffer
// is either refused with strata's error or decodes within its declared sizes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "quant/codec.hpp"
#include "strata/errors.hpp"

namespace q = strata::quant;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> wire(reinterpret_cast<const std::byte*>(data), size);
  q::WireHeader h;
  try {
    h = q::read_header(wire);
  } catch (const strata::Error&) {
    return 0;
  }
  if (h.k > h.n) std::abort();  // read_header's own promise
  if (h.n > (1u << 22)) return 0;  // the caller sizes the output; keep the run fast
  std::vector<float> out(h.n, 1.0f), sum(h.n, 1.0f);
  try {
    q::decode(wire, out);
    q::decode_add(wire, sum);
  } catch (const strata::Error&) {
    // Refused: nothing may have been written.
    for (float x : out)
      if (x != 1.0f) std::abort();
  }
  std::vector<std::uint32_t> idx;
  std::vector<float> values;
  try {
    if (q::decode_sparse(wire, idx, values)) {
      if (idx.size() != values.size() || idx.size() > h.n) std::abort();
      for (std::size_t i = 0; i < idx.size(); ++i)
        if (idx[i] >= h.n || (i > 0 && idx[i] <= idx[i - 1])) std::abort();
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
