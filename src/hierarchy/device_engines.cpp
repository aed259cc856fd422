#include "hierarchy/device_engines.hpp"

namespace strata::hierarchy {

namespace {

class DeviceCallEngines final : public CallEngines {
 public:
  DeviceCallEngines(const Plan& plan, device::CopyStream& copies, NcclComms* nccl) : copies_(copies) {
    const int depth = plan.depth();
    if (nccl) inside_ = nccl_engine(*nccl, copies);
    top_ = staged_engine(copies);
    for (int i = 0; i < depth; ++i)
      levels_.push_back(i == depth - 1 ? top_.get() : inside_ ? inside_.get() : &host_engine());
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
  return std::make_unique<DeviceCallEngines>(plan, copies, nccl);
}

}  // namespace strata::hierarchy
