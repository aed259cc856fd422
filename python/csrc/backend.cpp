#include "backend.hpp"

#include <cstdio>
#include <numeric>
#include <random>

#include "torch_store.hpp"

namespace strata::torch_backend {

namespace {

DataType dtype_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return DataType::f32;
    case at::kDouble: return DataType::f64;
    case at::kHalf: return DataType::f16;
    case at::kBFloat16: return DataType::bf16;
    case at::kChar: return DataType::i8;
    case at::kByte: return DataType::u8;
    case at::kInt: return DataType::i32;
    case at::kLong: return DataType::i64;
    default:
      TORCH_CHECK_VALUE(false, "strata ", op, ": dtype ", t.scalar_type(),
                        " is not supported (float32/64, float16, bfloat16, int8, uint8, int32, int64)");
  }
}

ReduceOp op_of(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::sum;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    default:
      TORCH_CHECK_VALUE(false, "strata ", name, ": reduce op ", static_cast<int>(op.op_),
                        " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

// c10d passes one tensor per call (the multi-device lists are gone from torch 2).
at::Tensor& single(std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK_VALUE(ts.size() == 1, "strata ", op, ": expects one tensor, got ", ts.size());
  return ts[0];
}

void check_tensor(const at::Tensor& t, const char* op, c10::Device device) {
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "strata ", op, ": only dense tensors are supported");
  TORCH_CHECK_VALUE(t.device() == device, "strata ", op, ": tensors on ", t.device(), " and ", device,
                    " in one call");
  TORCH_CHECK_VALUE(t.device().is_cpu() || t.device().is_cuda(), "strata ", op, ": tensors on ", t.device(),
                    " are not supported (cpu, cuda)");
}

CallOptions call(std::chrono::milliseconds timeout) {
  CallOptions o;
  if (timeout != c10d::kUnsetTimeout) o.timeout = timeout;
  return o;
}

std::vector<c10::Device> future_devices(c10::Device d) {
  if (d.is_cpu()) return {};
  return {d};
}

// Issue-time errors: bad arguments are Python ValueErrors; anything else (the group
// already failed) is torch's DistBackendError. Both carry strata's message.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, "strata: ", e.what());
  } catch (const Error& e) {
    std::rethrow_exception(backend_error(e.what()));
  }
}

std::size_t u(std::int64_t v) { return static_cast<std::size_t>(v); }

std::string hex(std::uint64_t v) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(v));
  return out;
}

std::vector<std::size_t> prefix(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t j = 1; j < counts.size(); ++j) d[j] = d[j - 1] + counts[j - 1];
  return d;
}

}  // namespace

StrataBackend::StrataBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout, bool enable_reconfigure)
    : c10d::Backend(rank, size), store_(store), timeout_(timeout) {
  // Handles name the instance (reconfigure.hpp): a process's own before it has members,
  // else one the members share, rank 0's.
  std::uint64_t token = std::random_device{}() * 0x100000000ULL + std::random_device{}();
  if (!enable_reconfigure) {
    comm_.emplace(guarded([&] {
      CommOptions o;
      o.timeout = timeout;
      return Communicator(std::make_shared<TorchStore>(store), rank, size, o);
    }));
    guarded([&] { comm_->broadcast(&token, &token, 1, DataType::i64, 0).wait(); });
  }
  instance_ = (enable_reconfigure ? "p" : "i") + hex(token);
}

StrataBackend::StrataBackend(Communicator comm, std::string instance)
    : c10d::Backend(comm.rank(), comm.size()), comm_(std::move(comm)), instance_(std::move(instance)) {}

Communicator& StrataBackend::communicator() {
  TORCH_CHECK(comm_, "strata: the group was made with enable_reconfigure=True and has no members yet; "
              "call torch.distributed._reconfigure with the members' handles first");
  return *comm_;
}

StrataBackend::~StrataBackend() = default;

c10::intrusive_ptr<StrataBackend> StrataBackend::shrink(const std::vector<int>& lost,
                                                         const c10::intrusive_ptr<c10d::Store>& arbiter) {
  CommOptions o;
  if (arbiter) o.arbiter = std::make_shared<TorchStore>(arbiter);
  auto excluded = lost;
  std::sort(excluded.begin(), excluded.end());
  return guarded([&] {
    return c10::make_intrusive<StrataBackend>(communicator().shrink(lost, o), instance_of(shrink_uuid(instance_, excluded)));
  });
}

std::string StrataBackend::share_state(const std::vector<at::Tensor>& tensors, int root, bool residuals) {
  std::vector<std::span<std::byte>> spans;
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.device().is_cpu() && t.is_contiguous(), "strata: share_state takes contiguous CPU tensors");
    spans.emplace_back(static_cast<std::byte*>(t.data_ptr()), t.nbytes());
  }
  return guarded([&] { return communicator().share_state(spans, root, residuals); });
}

void StrataBackend::abort() {
  if (comm_) comm_->abort();
}
void StrataBackend::shutdown() { completions_.drain(); }

c10::intrusive_ptr<StrataWork> StrataBackend::start(c10d::OpType op, const std::vector<at::Tensor>& outputs,
                                                    c10::Device device, bool device_ok) {
  auto w = c10::make_intrusive<StrataWork>(rank_, op, outputs, future_devices(device));
  w->stager = std::make_unique<Stager>(device, device_ok);
  return w;
}

c10::intrusive_ptr<c10d::Work> StrataBackend::submit(c10::intrusive_ptr<StrataWork> w) {
  if (const auto op = w->retrieveOpType();
      op != c10d::OpType::SEND && op != c10d::OpType::RECV && op != c10d::OpType::RECVANYSOURCE)
    ++collectives_;
  completions_.push(w);
  return w;
}

c10::intrusive_ptr<c10d::Work> StrataBackend::one_tensor(c10d::OpType op, const at::Tensor& t, Staging staging,
                                                         std::chrono::milliseconds timeout, const Issue& issue) {
  // strata's send and recv take host memory only.
  auto w = start(op, {t}, t.device(), op != c10d::OpType::SEND && op != c10d::OpType::RECV);
  auto h = staging == Staging::in    ? w->stager->in(t)
           : staging == Staging::out ? w->stager->out(t)
                                     : w->stager->inout(t);
  w->stager->ready();
  w->keep = {h};
  w->ops.push_back(issue(h, w->stager->options(timeout)));
  return submit(w);
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  return guarded([&] {
    auto& t = single(tensors, "allreduce");
    check_tensor(t, "allreduce", t.device());
    const auto dt = dtype_of(t, "allreduce");
    const auto op = op_of(opts.reduceOp, "allreduce");
    return one_tensor(c10d::OpType::ALLREDUCE, t, Staging::inout, opts.timeout, [&](const at::Tensor& h, const CallOptions& o) {
      return communicator().allreduce(h.data_ptr(), h.data_ptr(), u(h.numel()), dt, op, o);
    });
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  return guarded([&] {
    TORCH_CHECK_VALUE(!tensors.empty(), "strata allreduce_coalesced: no tensors");
    const auto device = tensors[0].device();
    for (auto& t : tensors) check_tensor(t, "allreduce_coalesced", device), dtype_of(t, "allreduce_coalesced");
    const auto op = op_of(opts.reduceOp, "allreduce_coalesced");
    auto w = start(c10d::OpType::ALLREDUCE_COALESCED, tensors, device);
    std::vector<at::Tensor> hs;
    for (auto& t : tensors) hs.push_back(w->stager->inout(t));
    w->stager->ready();
    for (auto& h : hs)
      w->ops.push_back(communicator().allreduce(h.data_ptr(), h.data_ptr(), u(h.numel()), dtype_of(h, "allreduce_coalesced"),
                                       op, w->stager->options(opts.timeout)));
    w->keep = std::move(hs);
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allreduce_compressed(at::Tensor& t, const std::string& spec,
                                                                   const std::string& key) {
  return guarded([&] {
    check_tensor(t, "allreduce_compressed", t.device());
    auto z = Compression::parse(spec);
    z.key = key;
    return one_tensor(c10d::OpType::ALLREDUCE, t, Staging::inout, c10d::kUnsetTimeout,
                      [&](const at::Tensor& h, const CallOptions& base) {
      CallOptions o = base;
      if (z.lossy()) o.compression = z;  // exact: the plain allreduce
      return communicator().allreduce(h.data_ptr(), h.data_ptr(), u(h.numel()), dtype_of(h, "allreduce_compressed"),
                             ReduceOp::avg, o);
    });
  });
}

std::vector<std::byte> StrataBackend::save_residuals() {
  return communicator().save_residuals();
}

void StrataBackend::reset_residuals(const std::string& key) {
  communicator().reset_residuals(key);
}

void StrataBackend::restore_residuals(std::span<const std::byte> saved) {
  communicator().restore_residuals(saved);
}

c10::intrusive_ptr<c10d::Work> StrataBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  return guarded([&] {
    auto& t = single(tensors, "broadcast");
    check_tensor(t, "broadcast", t.device());
    const auto dt = dtype_of(t, "broadcast");
    const int root = static_cast<int>(opts.rootRank);
    return one_tensor(c10d::OpType::BROADCAST, t, rank_ == root ? Staging::in : Staging::out, opts.timeout,
                      [&](const at::Tensor& h, const CallOptions& o) {
      return communicator().broadcast(h.data_ptr(), h.data_ptr(), u(h.numel()), dt, root, o);
    });
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  return guarded([&] {
    auto& t = single(tensors, "reduce");
    check_tensor(t, "reduce", t.device());
    const auto dt = dtype_of(t, "reduce");
    const auto op = op_of(opts.reduceOp, "reduce");
    const int root = static_cast<int>(opts.rootRank);
    return one_tensor(c10d::OpType::REDUCE, t, rank_ == root ? Staging::inout : Staging::in, opts.timeout,
                      [&](const at::Tensor& h, const CallOptions& o) {
      return communicator().reduce(h.data_ptr(), rank_ == root ? h.data_ptr() : nullptr, u(h.numel()), dt, op, root, o);
    });
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  return guarded([&] {
    check_tensor(input, "all_gather_into_tensor", input.device());
    check_tensor(output, "all_gather_into_tensor", input.device());
    TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "strata all_gather_into_tensor: dtypes differ");
    TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "strata all_gather_into_tensor: output has ",
                      output.numel(), " elements, expected ", size_, " x ", input.numel());
    auto w = start(c10d::OpType::_ALLGATHER_BASE, {output}, input.device());
    auto hin = w->stager->in(input);
    auto hout = w->stager->out(output);
    w->stager->ready();
    w->keep = {hin, hout};
    w->ops.push_back(communicator().allgather(hin.data_ptr(), hout.data_ptr(), u(hin.numel()), dtype_of(input, "all_gather"),
                                     w->stager->options(opts.timeout)));
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  return guarded([&] {
    auto& in = single(inputs, "all_gather");
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                      "strata all_gather: expects a list of ", size_, " output tensors");
    check_tensor(in, "all_gather", in.device());
    for (auto& o : outputs[0]) {
      check_tensor(o, "all_gather", in.device());
      TORCH_CHECK_VALUE(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                        "strata all_gather: every output must match the input's size and dtype");
    }
    auto w = start(c10d::OpType::ALLGATHER, outputs[0], in.device());
    auto hin = w->stager->in(in);
    std::vector<at::Tensor> houts;
    for (auto& o : outputs[0]) houts.push_back(w->stager->out(o));
    auto flat = w->stager->scratch(in.numel() * size_, in.scalar_type());
    w->stager->ready();
    w->keep = {hin, flat};
    w->ops.push_back(communicator().allgather(hin.data_ptr(), flat.data_ptr(), u(hin.numel()), dtype_of(in, "all_gather"),
                                     w->stager->options(opts.timeout)));
    w->after = [flat, houts, n = in.numel()]() mutable {
      for (std::size_t j = 0; j < houts.size(); ++j)
        houts[j].view(-1).copy_(flat.narrow(0, static_cast<std::int64_t>(j) * n, n));
    };
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions& opts) {
  return guarded([&] {
    const char* name = "all_gather_coalesced";
    TORCH_CHECK_VALUE(!inputs.empty(), "strata ", name, ": no input tensors");
    TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_, "strata ", name, ": expects ", size_,
                      " output lists (one per rank), got ", outputs.size());
    const auto device = inputs[0].device();
    for (auto& in : inputs) check_tensor(in, name, device), dtype_of(in, name);
    std::vector<at::Tensor> all_outputs;
    for (std::size_t r = 0; r < outputs.size(); ++r) {
      TORCH_CHECK_VALUE(outputs[r].size() == inputs.size(), "strata ", name, ": output list ", r, " has ",
                        outputs[r].size(), " tensors, expected ", inputs.size(), " (one per input)");
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        auto& o = outputs[r][k];
        check_tensor(o, name, device);
        TORCH_CHECK_VALUE(o.numel() == inputs[k].numel() && o.scalar_type() == inputs[k].scalar_type(), "strata ",
                          name, ": output ", k, " of rank ", r, " must match input ", k, "'s size and dtype");
        all_outputs.push_back(o);
      }
    }
    auto w = start(c10d::OpType::ALLGATHER_COALESCED, all_outputs, device);
    std::vector<at::Tensor> hins, flats;
    std::vector<std::vector<at::Tensor>> houts(outputs.size());
    for (auto& in : inputs) hins.push_back(w->stager->in(in));
    for (std::size_t r = 0; r < outputs.size(); ++r)
      for (auto& o : outputs[r]) houts[r].push_back(w->stager->out(o));
    for (auto& in : inputs) flats.push_back(w->stager->scratch(in.numel() * size_, in.scalar_type()));
    w->stager->ready();
    for (std::size_t k = 0; k < inputs.size(); ++k)
      w->ops.push_back(communicator().allgather(hins[k].data_ptr(), flats[k].data_ptr(), u(hins[k].numel()),
                                       dtype_of(inputs[k], name), w->stager->options(opts.timeout)));
    w->keep = hins;
    w->keep.insert(w->keep.end(), flats.begin(), flats.end());
    w->after = [flats, houts]() mutable {
      for (std::size_t r = 0; r < houts.size(); ++r)
        for (std::size_t k = 0; k < houts[r].size(); ++k) {
          const auto n = houts[r][k].numel();
          houts[r][k].view(-1).copy_(flats[k].narrow(0, static_cast<std::int64_t>(r) * n, n));
        }
    };
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  return guarded([&] {
    check_tensor(input, "reduce_scatter_tensor", input.device());
    check_tensor(output, "reduce_scatter_tensor", input.device());
    TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "strata reduce_scatter_tensor: dtypes differ");
    TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "strata reduce_scatter_tensor: input has ",
                      input.numel(), " elements, expected ", size_, " x ", output.numel());
    const auto op = op_of(opts.reduceOp, "reduce_scatter_tensor");
    auto w = start(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, input.device());
    auto hin = w->stager->in(input);
    auto hout = w->stager->out(output);
    w->stager->ready();
    w->keep = {hin, hout};
    w->ops.push_back(communicator().reduce_scatter(hin.data_ptr(), hout.data_ptr(), u(hout.numel()),
                                          dtype_of(input, "reduce_scatter"), op, w->stager->options(opts.timeout)));
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  return guarded([&] {
    auto& out = single(outputs, "reduce_scatter");
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "strata reduce_scatter: expects a list of ", size_, " input tensors");
    check_tensor(out, "reduce_scatter", out.device());
    for (auto& i : inputs[0]) {
      check_tensor(i, "reduce_scatter", out.device());
      TORCH_CHECK_VALUE(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                        "strata reduce_scatter: every input must match the output's size and dtype");
    }
    const auto op = op_of(opts.reduceOp, "reduce_scatter");
    auto w = start(c10d::OpType::REDUCE_SCATTER, {out}, out.device());
    std::vector<at::Tensor> hins;
    for (auto& i : inputs[0]) hins.push_back(w->stager->in(i).reshape(-1));
    auto hout = w->stager->out(out);
    w->stager->ready();
    auto flat = at::cat(hins);
    w->keep = {flat, hout};
    w->ops.push_back(communicator().reduce_scatter(flat.data_ptr(), hout.data_ptr(), u(hout.numel()),
                                          dtype_of(out, "reduce_scatter"), op, w->stager->options(opts.timeout)));
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::all_to_all(const at::Tensor& send,
                                                         const at::Tensor& recv, std::vector<std::size_t> send_counts,
                                                         std::vector<std::size_t> recv_counts,
                                                         c10::intrusive_ptr<StrataWork> w,
                                                         std::chrono::milliseconds timeout) {
  const auto sd = prefix(send_counts), rd = prefix(recv_counts);
  w->ops.push_back(communicator().alltoallv(send.data_ptr(), send_counts, sd, recv.data_ptr(), recv_counts, rd,
                                   dtype_of(send, "all_to_all"), w->stager->options(timeout)));
  return submit(std::move(w));
}

c10::intrusive_ptr<c10d::Work> StrataBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_splits,
                                                            std::vector<int64_t>& input_splits,
                                                            const c10d::AllToAllOptions& opts) {
  return guarded([&] {
    check_tensor(input, "all_to_all_single", input.device());
    check_tensor(output, "all_to_all_single", input.device());
    TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "strata all_to_all_single: dtypes differ");
    // Splits count rows (the first dimension); strata counts elements.
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* name) {
      std::vector<std::size_t> c(u(size_));
      if (splits.empty()) {
        TORCH_CHECK_VALUE(t.numel() % size_ == 0, "strata all_to_all_single: ", name, " of ", t.numel(),
                          " elements does not split evenly over ", size_, " ranks");
        std::fill(c.begin(), c.end(), u(t.numel() / size_));
        return c;
      }
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "strata all_to_all_single: ", name, " splits has ",
                        splits.size(), " entries for ", size_, " ranks");
      const std::int64_t rows = t.dim() ? t.size(0) : 1, row = rows ? t.numel() / rows : 0;
      std::int64_t total = 0;
      for (std::size_t j = 0; j < c.size(); ++j) {
        TORCH_CHECK_VALUE(splits[j] >= 0, "strata all_to_all_single: negative ", name, " split");
        total += splits[j];
        c[j] = u(splits[j] * row);
      }
      TORCH_CHECK_VALUE(total == rows, "strata all_to_all_single: ", name, " splits add up to ", total, " rows of ",
                        rows);
      return c;
    };
    auto sc = counts(input, input_splits, "input");
    auto rc = counts(output, output_splits, "output");
    auto w = start(c10d::OpType::ALLTOALL_BASE, {output}, input.device());
    auto hin = w->stager->in(input);
    auto hout = w->stager->out(output);
    w->stager->ready();
    w->keep = {hin, hout};
    return all_to_all(hin, hout, std::move(sc), std::move(rc), w, opts.timeout);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  return guarded([&] {
    TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
                      "strata all_to_all: expects ", size_, " input and output tensors");
    const auto device = inputs[0].device();
    std::vector<std::size_t> sc, rc;
    for (auto& t : inputs) {
      check_tensor(t, "all_to_all", device);
      TORCH_CHECK_VALUE(t.scalar_type() == inputs[0].scalar_type(), "strata all_to_all: dtypes differ");
      sc.push_back(u(t.numel()));
    }
    for (auto& t : outputs) {
      check_tensor(t, "all_to_all", device);
      TORCH_CHECK_VALUE(t.scalar_type() == inputs[0].scalar_type(), "strata all_to_all: dtypes differ");
      rc.push_back(u(t.numel()));
    }
    auto w = start(c10d::OpType::ALLTOALL, outputs, device);
    std::vector<at::Tensor> hins, houts;
    for (auto& t : inputs) hins.push_back(w->stager->in(t).reshape(-1));
    for (auto& t : outputs) houts.push_back(w->stager->out(t));
    const auto total = std::accumulate(rc.begin(), rc.end(), std::size_t{0});
    auto flat_out = w->stager->scratch(static_cast<std::int64_t>(total), inputs[0].scalar_type());
    w->stager->ready();
    auto flat_in = at::cat(hins);
    w->keep = {flat_in, flat_out};
    w->after = [flat_out, houts, rc]() mutable {
      std::int64_t at = 0;
      for (std::size_t j = 0; j < houts.size(); ++j) {
        const auto n = static_cast<std::int64_t>(rc[j]);
        houts[j].view(-1).copy_(flat_out.narrow(0, at, n));
        at += n;
      }
    };
    return all_to_all(flat_in, flat_out, std::move(sc), std::move(rc), w, opts.timeout);
  });
}

// gather and scatter are all-to-alls in which only the root's row (or column) is
// non-empty: checked like any collective, one message per rank to or from the root.
c10::intrusive_ptr<c10d::Work> StrataBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  return guarded([&] {
    auto& in = single(inputs, "gather");
    check_tensor(in, "gather", in.device());
    const int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK_VALUE(root >= 0 && root < size_, "strata gather: root ", root, " is out of range");
    const auto n = u(in.numel());
    std::vector<std::size_t> sc(u(size_), 0), rc(u(size_), 0);
    sc[u(root)] = n;
    std::vector<at::Tensor> outs;
    if (rank_ == root) {
      TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                        "strata gather: the root expects a list of ", size_, " output tensors");
      for (auto& o : outputs[0]) {
        check_tensor(o, "gather", in.device());
        TORCH_CHECK_VALUE(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                          "strata gather: every output must match the input's size and dtype");
      }
      std::fill(rc.begin(), rc.end(), n);
      outs = outputs[0];
    } else {
      TORCH_CHECK_VALUE(outputs.empty() || outputs[0].empty(), "strata gather: only the root takes outputs");
    }
    auto w = start(c10d::OpType::GATHER, outs, in.device());
    auto hin = w->stager->in(in);
    std::vector<at::Tensor> houts;
    for (auto& o : outs) houts.push_back(w->stager->out(o));
    auto flat = w->stager->scratch(static_cast<std::int64_t>(rank_ == root ? n * u(size_) : 0), in.scalar_type());
    w->stager->ready();
    w->keep = {hin, flat};
    w->after = [flat, houts, n = in.numel()]() mutable {
      for (std::size_t j = 0; j < houts.size(); ++j)
        houts[j].view(-1).copy_(flat.narrow(0, static_cast<std::int64_t>(j) * n, n));
    };
    return all_to_all(hin, flat, std::move(sc), std::move(rc), w, opts.timeout);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  return guarded([&] {
    auto& out = single(outputs, "scatter");
    check_tensor(out, "scatter", out.device());
    const int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK_VALUE(root >= 0 && root < size_, "strata scatter: root ", root, " is out of range");
    const auto n = u(out.numel());
    std::vector<std::size_t> sc(u(size_), 0), rc(u(size_), 0);
    rc[u(root)] = n;
    auto w = start(c10d::OpType::SCATTER, {out}, out.device());
    std::vector<at::Tensor> hins;
    if (rank_ == root) {
      TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                        "strata scatter: the root expects a list of ", size_, " input tensors");
      for (auto& i : inputs[0]) {
        check_tensor(i, "scatter", out.device());
        TORCH_CHECK_VALUE(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                          "strata scatter: every input must match the output's size and dtype");
        hins.push_back(w->stager->in(i).reshape(-1));
      }
      std::fill(sc.begin(), sc.end(), n);
    } else {
      TORCH_CHECK_VALUE(inputs.empty() || inputs[0].empty(), "strata scatter: only the root takes inputs");
    }
    auto hout = w->stager->out(out);
    w->stager->ready();
    auto flat = hins.empty() ? w->stager->scratch(0, out.scalar_type()) : at::cat(hins);
    w->keep = {flat, hout};
    return all_to_all(flat, hout, std::move(sc), std::move(rc), w, opts.timeout);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::barrier(const c10d::BarrierOptions& opts) {
  return guarded([&] {
    auto w = c10::make_intrusive<StrataWork>(rank_, c10d::OpType::BARRIER, std::vector<at::Tensor>{},
                                             std::vector<c10::Device>{});
    w->ops.push_back(communicator().barrier(call(opts.timeout)));
    return submit(w);
  });
}

// strata matches messages between two ranks in order; tags are not used, so a
// receiver's sequence of receives from a peer must follow that peer's sends.
c10::intrusive_ptr<c10d::Work> StrataBackend::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  return guarded([&] {
    auto& t = single(tensors, "send");
    check_tensor(t, "send", t.device());
    return one_tensor(c10d::OpType::SEND, t, Staging::in, c10d::kUnsetTimeout, [&](const at::Tensor& h, const CallOptions& o) {
      return communicator().send(h.data_ptr(), u(h.numel()), dtype_of(t, "send"), dst, o);
    });
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  return guarded([&] {
    auto& t = single(tensors, "recv");
    check_tensor(t, "recv", t.device());
    auto w = start(c10d::OpType::RECVANYSOURCE, {t}, t.device(), false);
    auto h = w->stager->out(t);
    w->stager->ready();
    w->keep = {h};
    w->ops.push_back(communicator().recv_any(h.data_ptr(), u(h.numel()), dtype_of(t, "recv"), &w->source,
                                             w->stager->options(c10d::kUnsetTimeout)));
    return submit(w);
  });
}

c10::intrusive_ptr<c10d::Work> StrataBackend::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  return guarded([&] {
    auto& t = single(tensors, "recv");
    check_tensor(t, "recv", t.device());
    return one_tensor(c10d::OpType::RECV, t, Staging::out, c10d::kUnsetTimeout, [&](const at::Tensor& h, const CallOptions& o) {
      return communicator().recv(h.data_ptr(), u(h.numel()), dtype_of(t, "recv"), src, o);
    });
  });
}

}  // namespace strata::torch_backend
