#include "hierarchy/device_engines.hpp"

#include "collectives/algorithms.hpp"

namespace strata::hierarchy {

namespace {

class DeviceCallEngines final : public CallEngines {
 public:
  // depth levels, the last staged across regions; staged_top false: one level, NCCL's.
  DeviceCallEngines(int depth, bool staged_top, device::CopyStream& copies, NcclComms* nccl)
      : copies_(copies), emulated_(nccl == nullptr) {
    if (nccl) inside_ = nccl_engine(*nccl, copies);
    if (staged_top) top_ = staged_engine(copies);
    for (int i = 0; i < depth; ++i)
      levels_.push_back(staged_top && i == depth - 1 ? top_.get() : inside_ ? inside_.get() : &host_engine());
  }
  const LevelEngine& level(int i) const override { return *levels_[static_cast<std::size_t>(i)]; }
  // On CUDA the copy goes on the stream, before the NCCL and staging work that follows.
  // Emulated, the host engine stands in for NCCL and runs at once, not in the stream's
  // order: the copy must be done before it returns.
  void copy(void* dst, const void* src, std::size_t bytes) const override {
    if (emulated_)
      collectives::copy_if_distinct(dst, src, bytes);
    else
      copies_.within_device(dst, src, bytes);
  }
  void* scratch(collectives::Context&, std::size_t bytes) const override { return copies_.device_scratch(bytes); }
  bool on_device() const override { return true; }

 private:
  device::CopyStream& copies_;
  bool emulated_;
  std::unique_ptr<LevelEngine> inside_, top_;
  std::vector<const LevelEngine*> levels_;
};

}  // namespace

std::unique_ptr<CallEngines> device_engines(const Plan& plan, device::CopyStream& copies, NcclComms* nccl) {
  return std::make_unique<DeviceCallEngines>(plan.depth(), true, copies, nccl);
}

std::unique_ptr<CallEngines> flat_device_engines(device::CopyStream& copies, NcclComms* nccl) {
  return std::make_unique<DeviceCallEngines>(1, false, copies, nccl);
}

bool flat_runs_on_device(const collectives::CollArgs& a) {
  switch (a.kind) {
    case CollectiveKind::allreduce:
      return !a.algorithm && !(a.compression && a.compression->lossy());
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::allgather:
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce:
      return !a.algorithm;
    default:
      return false;
  }
}

}  // namespace strata::hierarchy
