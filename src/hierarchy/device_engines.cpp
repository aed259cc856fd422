#include "hierarchy/device_engines.hpp"

namespace strata::hierarchy {

namespace {

class DeviceCallEngines final : public CallEngines {
 public:
  // depth levels, the last staged across regions; staged_top false: one level, NCCL's.
  DeviceCallEngines(int depth, bool staged_top, device::CopyStream& copies, NcclComms* nccl) : copies_(copies) {
    if (nccl) inside_ = nccl_engine(*nccl, copies);
    if (staged_top) top_ = staged_engine(copies);
    for (int i = 0; i < depth; ++i)
      levels_.push_back(staged_top && i == depth - 1 ? top_.get() : inside_ ? inside_.get() : &host_engine());
  }
  const LevelEngine& level(int i) const override { return *levels_[static_cast<std::size_t>(i)]; }
  void copy(void* dst, const void* src, std::size_t bytes) const override { copies_.within_device(dst, src, bytes); }
  bool on_device() const override { return true; }

 private:
  device::CopyStream& copies_;
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
