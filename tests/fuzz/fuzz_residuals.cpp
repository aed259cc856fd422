// Error-feedback snapshots come back from checkpoints on disk: restore() takes any
// bytes, refuses them with strata's error and changes nothing, or takes them whole, in
// which case saving again reproduces a snapshot that restores to the same state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "quant/error_feedback.hpp"
#include "strata/errors.hpp"

namespace q = strata::quant;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // First byte odd: the rest with its checksum made right, so the fuzzer gets past the
  // checksum to the entries behind it; even: the rest exactly as given.
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1,
                               reinterpret_cast<const std::byte*>(data) + size);
  if ((data[0] & 1) && bytes.size() >= 8) {
    const std::uint64_t sum = q::snapshot_checksum(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  }
  q::ErrorFeedback ef;
  const std::vector<std::byte> empty = ef.save();
  try {
    ef.restore(bytes);
  } catch (const strata::Error&) {
    if (ef.save() != empty) std::abort();  // a refused snapshot changes nothing
    return 0;
  }
  const std::vector<std::byte> saved = ef.save();
  q::ErrorFeedback again;
  again.restore(saved);
  if (again.save() != saved) std::abort();
  return 0;
}
