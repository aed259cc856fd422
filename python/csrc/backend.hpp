// torch.distributed backend "strata": every c10d collective maps onto a strata
// communicator (hierarchical plans, the WAN link, compression), one per process group.
// Tensors on CPU are used in place; CUDA tensors are staged through pinned host memory
// (staging.hpp). Calls are checked and issued on the caller's thread in program order;
// a CompletionThread completes the torch Works and their futures.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <set>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "reconfigure.hpp"
#include "strata/strata.hpp"
#include "work.hpp"

namespace strata::torch_backend {

class StrataBackend : public c10d::Backend {
 public:
  // enable_reconfigure: no communicator until reconfigure() names the members (torch's
  // late initialisation); collectives before it fail saying so.
  StrataBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
                bool enable_reconfigure = false);
  // Over a communicator that already exists: the survivors' after a shrink.
  StrataBackend(Communicator comm, std::string instance);
  ~StrataBackend() override;

  const std::string getBackendName() const override { return "strata"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  // outputs[r][k] receives rank r's inputs[k]; one allgather per input, any dtypes.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  void abort() override;
  void shutdown() override;

  // The collectives issued on this group so far (sends and receives apart), which torch's
  // checks under TORCH_DISTRIBUTED_DEBUG=DETAIL compare across ranks before each one, as
  // gloo's; every rank starts at 0, so there is nothing to agree on first.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_.load(); }

  // The compressed allreduce of a DDP gradient bucket (spec as Compression::parse reads
  // it; "none" is exact), averaged over the group, error feedback under key.
  c10::intrusive_ptr<c10d::Work> allreduce_compressed(at::Tensor& tensor, const std::string& spec,
                                                      const std::string& key);
  std::vector<std::byte> save_residuals();
  void reset_residuals(const std::string& key);
  void restore_residuals(std::span<const std::byte> saved);
  Communicator& communicator();
  // The survivors' backend (Communicator::shrink); every survivor calls it. `arbiter`
  // (may be null): a store outside every rank that breaks an even split. For torch
  // without the reconfigure API, where a process group cannot change its rank and size.
  c10::intrusive_ptr<StrataBackend> shrink(const std::vector<int>& lost, const c10::intrusive_ptr<c10d::Store>& arbiter);

  // torch's reconfigure API (reconfigure.hpp); the c10d overrides below forward to it
  // where torch has them. handle(): this rank's.
  std::string handle() const { return make_handle(instance_, rank_); }
  // Blocks until this rank is in the new group; on failure the backend is as it was.
  void reconfigure_to(std::int64_t uuid, const std::vector<std::string>& handles,
                      std::optional<std::chrono::milliseconds> timeout, QuorumRule rule,
                      const c10::intrusive_ptr<c10d::Store>& arbiter);
  // strata.torch.shrink on torch with the reconfigure API: in place, no store, a uuid
  // derived from the excluded ranks.
  void shrink_in_place(const std::vector<int>& lost, std::chrono::milliseconds timeout,
                       const c10::intrusive_ptr<c10d::Store>& arbiter);
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override { return handle(); }
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
  // Communicator::share_state over CPU tensors (contiguous), in place.
  std::string share_state(const std::vector<at::Tensor>& tensors, int root, bool residuals);

 private:
  // device_ok: strata takes this call on device memory (all but send and recv), so CUDA
  // tensors go to it as they are (staging.hpp).
  c10::intrusive_ptr<StrataWork> start(c10d::OpType op, const std::vector<at::Tensor>& outputs, c10::Device device,
                                       bool device_ok = true);
  c10::intrusive_ptr<c10d::Work> submit(c10::intrusive_ptr<StrataWork> w);
  // The common shape: one tensor, staged as strata reads it, writes it or both, one op.
  enum class Staging { in, out, inout };
  using Issue = std::function<strata::Work(const at::Tensor& staged, const CallOptions& o)>;
  c10::intrusive_ptr<c10d::Work> one_tensor(c10d::OpType op, const at::Tensor& t, Staging staging,
                                            std::chrono::milliseconds timeout, const Issue& issue);
  // alltoallv over host tensors, counts in elements, blocks in rank order.
  c10::intrusive_ptr<c10d::Work> all_to_all(const at::Tensor& send, const at::Tensor& recv,
                                            std::vector<std::size_t> send_counts, std::vector<std::size_t> recv_counts,
                                            c10::intrusive_ptr<StrataWork> w, std::chrono::milliseconds timeout);

  // The group's store (reconfigure's rendezvous) and default timeout; null store for a
  // backend over a shrunk communicator, which can still shrink but not create.
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_{0};
  std::optional<Communicator> comm_;  // empty until reconfigure() under enable_reconfigure
  std::string instance_;              // reconfigure.hpp
  std::set<std::int64_t> used_uuids_;
  std::atomic<std::uint64_t> collectives_{0};  // getSequenceNumberForGroup
  CompletionThread completions_;  // after comm_: stopped (drained) before it
};

}  // namespace strata::torch_backend
