#include "core/fingerprint.hpp"

namespace strata::detail {

std::string Fingerprint::describe() const {
  std::string s = std::string(to_string(kind)) + " #" + std::to_string(seq);
  switch (kind) {
    case CollectiveKind::barrier:
      return s;
    case CollectiveKind::alltoall:
      return s + " (" + to_string(dtype) + (count == kUnevenSplits ? ", uneven splits)" : " x " + std::to_string(count) + " per rank)");
    case CollectiveKind::allgather:
      return s + " (" + to_string(dtype) + " x " + std::to_string(count) + ")";
    case CollectiveKind::broadcast:
      return s + " (" + to_string(dtype) + " x " + std::to_string(count) + ", root " +
             std::to_string(root) + ")";
    case CollectiveKind::reduce:
      return s + " (" + to_string(dtype) + " x " + std::to_string(count) + ", " +
             to_string(op) + ", root " + std::to_string(root) + ")";
    default:
      return s + " (" + to_string(dtype) + " x " + std::to_string(count) + ", " +
             to_string(op) + ")";
  }
}

}  // namespace strata::detail
