#include "bootstrap/mesh_link.hpp"

namespace strata::bootstrap {

void MeshLink::keep(std::string frame) {
  ++sent_;
  kept_bytes_ += frame.size();
  kept_.push_back(std::move(frame));
}

void MeshLink::acknowledged(std::uint64_t n) {
  // An acknowledgement of frames never sent is a confused peer: it acknowledges what it can.
  if (n > sent_) n = sent_;
  while (acked_ < n) {
    kept_bytes_ -= kept_.front().size();
    kept_.pop_front();
    ++acked_;
  }
}

std::vector<std::string> MeshLink::resume(std::uint64_t n) {
  acknowledged(n);
  return {kept_.begin(), kept_.end()};
}

MeshLink::Take MeshLink::take(std::uint64_t seq) {
  if (seq <= received_) return Take::duplicate;
  if (seq != received_ + 1) return Take::gap;
  ++received_;
  return Take::deliver;
}

}  // namespace strata::bootstrap
