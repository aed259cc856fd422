#include "device/nccl_library.hpp"


#include "device/shared_library.hpp"
#include "strata/errors.hpp"

namespace strata::device {

namespace {

Opened<NcclLibrary> load(const std::string& path) {
  Opened<NcclLibrary> l;
  SharedLibrary lib(path.empty() ? std::vector<std::string>{"libnccl.so.2", "libnccl.so"}
                                 : std::vector<std::string>{path});
  if (!lib.open()) {
    l.why = "NCCL could not be opened (" + lib.why() + "); install NCCL (the nvidia-nccl wheel torch uses "
            "will do) or name it with STRATA_NCCL_LIBRARY";
    return l;
  }
  NcclLibrary& n = l.api;
  const bool all = lib.take(n.get_version, "ncclGetVersion") && lib.take(n.get_error_string, "ncclGetErrorString") &&
                   lib.take(n.get_unique_id, "ncclGetUniqueId") && lib.take(n.comm_init_rank, "ncclCommInitRank") &&
                   lib.take(n.comm_abort, "ncclCommAbort") && lib.take(n.comm_destroy, "ncclCommDestroy") &&
                   lib.take(n.comm_get_async_error, "ncclCommGetAsyncError") &&
                   lib.take(n.all_reduce, "ncclAllReduce") && lib.take(n.reduce_scatter, "ncclReduceScatter") &&
                   lib.take(n.all_gather, "ncclAllGather") && lib.take(n.broadcast, "ncclBroadcast") &&
                   lib.take(n.reduce, "ncclReduce") && lib.take(n.send, "ncclSend") &&
                   lib.take(n.recv, "ncclRecv") && lib.take(n.group_start, "ncclGroupStart") &&
                   lib.take(n.group_end, "ncclGroupEnd");
  if (!all) {
    l.why = lib.name() + " lacks an entry point strata needs (" + lib.why() + ")";
    return l;
  }
  if (n.get_version(&n.version) != kNcclSuccess || n.version < 21000) {
    l.why = lib.name() + " is NCCL " + std::to_string(n.version) + "; strata needs 2.10 or newer (avg)";
    return l;
  }
  l.ok = true;
  return l;
}

OpenOnce<NcclLibrary> opened;

}  // namespace

void NcclLibrary::check(NcclResult r, const char* call, const std::string& what) const {
  if (r == kNcclSuccess) return;
  const char* s = get_error_string ? get_error_string(r) : nullptr;
  throw TransportError(what + ": " + call + " failed: NCCL error " + std::to_string(r) + " (" +
                       (s ? s : "unknown error") + ")");
}

const NcclLibrary* nccl_library(const std::string& path) {
  const auto& o = opened.get([&] { return load(path); });
  return o.ok ? &o.api : nullptr;
}

const std::string& why_no_nccl() {
  return opened.get([] { return load(""); }).why;
}

int nccl_dtype(DataType dt) {
  switch (dt) {
    case DataType::i8: return 0;
    case DataType::u8: return 1;
    case DataType::i32: return 2;
    case DataType::i64: return 4;
    case DataType::f16: return 6;
    case DataType::f32: return 7;
    case DataType::f64: return 8;
    case DataType::bf16: return 9;
  }
  return -1;
}

int nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::max: return 2;
    case ReduceOp::min: return 3;
    case ReduceOp::avg: return 4;
  }
  return -1;
}

}  // namespace strata::device
