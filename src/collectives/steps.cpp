#include "collectives/steps.hpp"

#include <array>
#include <new>
#include <vector>

namespace strata::collectives {

namespace {

// Frames in 64-byte classes up to 4 KiB; larger ones go straight to the heap.
constexpr std::size_t kClassBytes = 64, kClasses = 64, kKeepPerClass = 16;

struct FrameCache {
  std::array<std::vector<void*>, kClasses> free;
  ~FrameCache() {
    for (auto& list : free)
      for (void* p : list) ::operator delete(p);
  }
};

thread_local FrameCache t_frames;

std::size_t class_of(std::size_t bytes) { return (bytes + kClassBytes - 1) / kClassBytes; }

}  // namespace

void* Steps::promise_type::operator new(std::size_t bytes) {
  const std::size_t c = class_of(bytes);
  if (c < kClasses && !t_frames.free[c].empty()) {
    void* p = t_frames.free[c].back();
    t_frames.free[c].pop_back();
    return p;
  }
  return ::operator new(c < kClasses ? c * kClassBytes : bytes);
}

void Steps::promise_type::operator delete(void* frame, std::size_t bytes) noexcept {
  const std::size_t c = class_of(bytes);
  if (c < kClasses && t_frames.free[c].size() < kKeepPerClass) {
    try {
      t_frames.free[c].push_back(frame);
      return;
    } catch (...) {  // no room to keep it: free it
    }
  }
  ::operator delete(frame);
}

}  // namespace strata::collectives
