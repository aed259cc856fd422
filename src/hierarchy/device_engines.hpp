// The engines of a call on device buffers (level_engine.hpp, CallEngines): inside a
// region NCCL, on the GPU, in the order of the call's copy stream; across regions the
// host engine on a page-locked copy of the level's range (staged_engine), so that only
// this rank's shard of each segment leaves the device.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "collectives/steps.hpp"
#include "device/copy_stream.hpp"
#include "device/nccl_library.hpp"
#include "hierarchy/level_engine.hpp"
#include "hierarchy/plan.hpp"

namespace strata::hierarchy {

// The NCCL communicators of one strata communicator's groups, each made the first time
// a device call runs a level over it (its unique id sent by the group's first member
// over the transport, so the user sets nothing up). Engine thread only.
class NcclComms {
 public:
  explicit NcclComms(const device::NcclLibrary& nccl) : nccl_(nccl) {}
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;
  ~NcclComms();
  // Makes g's communicator unless it exists; every member calls it at the same point.
  collectives::Steps ensure(collectives::Context& ctx, const collectives::Group& g);
  device::NcclComm get(const collectives::Group& g) const;
  // After a failed call: NCCL's kernels waiting for a lost peer stop (ncclCommAbort), and
  // the communicators are dropped.
  void abort();
  const device::NcclLibrary& nccl() const { return nccl_; }

 private:
  const device::NcclLibrary& nccl_;
  std::map<std::vector<int>, device::NcclComm> comms_;
};

// A level inside a region on NCCL: reduce-scatter and all-gather of pieces, enqueued on
// the copy stream (nothing waits on the host; what follows on the stream runs after).
std::unique_ptr<LevelEngine> nccl_engine(NcclComms& comms, device::CopyStream& copies);
// A level on the host engine over a page-locked copy of its range: copied in, run,
// copied back, the stage done when its result is on the device.
std::unique_ptr<LevelEngine> staged_engine(device::CopyStream& copies);

// One device call's engines over `plan`: NCCL inside regions (nccl null: the host
// engine, which is right for emulated device memory only), the region level staged.
// `copies` and `nccl` must outlive the result.
std::unique_ptr<CallEngines> device_engines(const Plan& plan, device::CopyStream& copies, NcclComms* nccl);
// A flat communicator's: one level, NCCL over the world (nccl null: the host engine, for
// emulated device memory).
std::unique_ptr<CallEngines> flat_device_engines(device::CopyStream& copies, NcclComms* nccl);
// The calls a flat communicator runs on NCCL: the reducing and gathering collectives,
// exact, with no algorithm named (a named one runs on the host, staged whole).
bool flat_runs_on_device(const collectives::CollArgs& a);

}  // namespace strata::hierarchy
