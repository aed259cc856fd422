// The exported tables ncclNetPlugin_v8 ... _v11. Each entry is either an api:: function
// whose signature already fits, or a small adapter that only reshapes arguments (int
// sizes to size_t, dropped profiler handles, the v10 per-connect config). Nothing here
// decides anything; a new ABI version is one more table.
#include <algorithm>

#include "api.hpp"
#include "devices.hpp"
#include "nccl_abi.hpp"

namespace strata::nccl_net {

namespace {

constexpr const char* kName = "strata";

// Properties: copy the fields an older layout has, by name.
template <class Props>
abi::Result get_properties(int dev, Props* props) noexcept {
  abi::PropertiesV11 p{};
  const abi::Result r = api::get_properties(dev, props ? &p : nullptr);
  if (r != abi::success) return r;
  Props out{};
  out.name = p.name;
  out.pciPath = p.pciPath;
  out.guid = p.guid;
  out.ptrSupport = p.ptrSupport;
  out.regIsGlobal = p.regIsGlobal;
  out.speed = p.speed;
  out.port = p.port;
  out.latency = p.latency;
  out.maxComms = p.maxComms;
  out.maxRecvs = p.maxRecvs;
  out.netDeviceType = p.netDeviceType;
  out.netDeviceVersion = p.netDeviceVersion;
  if constexpr (requires(Props q) { q.forceFlush; }) {
    out.forceFlush = p.forceFlush;
    out.vProps = p.vProps;
    out.maxP2pBytes = p.maxP2pBytes;
    out.maxCollBytes = p.maxCollBytes;
  }
  if constexpr (requires(Props q) { q.maxMultiRequestSize; }) out.maxMultiRequestSize = p.maxMultiRequestSize;
  *props = out;
  return abi::success;
}

// Before v11, NCCL initialises once per process and never finalizes.
abi::Result init_v8(abi::Logger log) noexcept { return api::init(nullptr, 0, -1, log); }
abi::Result init_v10(abi::Logger log, abi::ProfilerCallback) noexcept {
  return api::init(nullptr, 0, -1, log);
}
abi::Result init_v11(void** ctx, std::uint64_t comm_id, abi::CommConfig* config, abi::Logger log,
                     abi::ProfilerCallback) noexcept {
  return api::init(ctx, comm_id, config ? config->trafficClass : -1, log);
}

abi::Result listen_v8(int dev, void* handle, void** listen_comm) noexcept {
  return api::listen(nullptr, dev, handle, listen_comm);
}
abi::Result connect_v8(int dev, void* handle, void** send_comm, abi::DeviceHandle** dev_comm) noexcept {
  return api::connect(nullptr, dev, handle, send_comm, dev_comm);
}
abi::Result connect_v10(int dev, abi::CommConfig*, void* handle, void** send_comm,
                        abi::DeviceHandle** dev_comm) noexcept {
  return api::connect(nullptr, dev, handle, send_comm, dev_comm);
}

abi::Result isend_v8(void* comm, void* data, int size, int tag, void* mhandle, void** request) noexcept {
  if (size < 0) {
    if (request) *request = nullptr;
    return abi::internal_error;
  }
  return api::isend(comm, data, static_cast<std::size_t>(size), tag, mhandle, request);
}
abi::Result isend_v10(void* comm, void* data, std::size_t size, int tag, void* mhandle, void*,
                      void** request) noexcept {
  return api::isend(comm, data, size, tag, mhandle, request);
}

abi::Result irecv_v8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                     void** request) noexcept {
  std::size_t wide[kMaxRecvs] = {};
  const bool convert = sizes && n > 0 && n <= kMaxRecvs;  // otherwise api::irecv rejects it
  if (convert)
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) {
        if (request) *request = nullptr;
        return abi::internal_error;
      }
      wide[i] = static_cast<std::size_t>(sizes[i]);
    }
  return api::irecv(comm, n, data, convert ? wide : nullptr, tags, mhandles, request);
}
abi::Result irecv_v9(void* comm, int n, void** data, std::size_t* sizes, int* tags, void** mhandles,
                     void** request) noexcept {
  return api::irecv(comm, n, data, sizes, tags, mhandles, request);
}
abi::Result irecv_v10(void* comm, int n, void** data, std::size_t* sizes, int* tags,
                      void** mhandles, void**, void** request) noexcept {
  return api::irecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace

}  // namespace strata::nccl_net

namespace snn = strata::nccl_net;

// getDeviceMr / irecvConsumed (device offload), makeVDevice (NIC fusion) and setNetAttr
// are left null: NCCL checks them before use, and a host plugin with one interface per
// device has nothing to offer through them.
extern "C" {

__attribute__((visibility("default"))) snn::abi::NetV8 ncclNetPlugin_v8 = {
    snn::kName,          snn::init_v8,           snn::api::devices,    snn::get_properties,
    snn::listen_v8,      snn::connect_v8,        snn::api::accept,     snn::api::reg_mr,
    snn::api::reg_mr_dmabuf, snn::api::dereg_mr, snn::isend_v8,        snn::irecv_v8,
    snn::api::iflush,    snn::api::test,         snn::api::close_send, snn::api::close_recv,
    snn::api::close_listen, nullptr,             nullptr,
};

__attribute__((visibility("default"))) snn::abi::NetV9 ncclNetPlugin_v9 = {
    snn::kName,          snn::init_v8,           snn::api::devices,    snn::get_properties,
    snn::listen_v8,      snn::connect_v8,        snn::api::accept,     snn::api::reg_mr,
    snn::api::reg_mr_dmabuf, snn::api::dereg_mr, snn::api::isend,      snn::irecv_v9,
    snn::api::iflush,    snn::api::test,         snn::api::close_send, snn::api::close_recv,
    snn::api::close_listen, nullptr,             nullptr,              nullptr,
};

__attribute__((visibility("default"))) snn::abi::NetV10 ncclNetPlugin_v10 = {
    snn::kName,          snn::init_v10,          snn::api::devices,    snn::get_properties,
    snn::listen_v8,      snn::connect_v10,       snn::api::accept,     snn::api::reg_mr,
    snn::api::reg_mr_dmabuf, snn::api::dereg_mr, snn::isend_v10,       snn::irecv_v10,
    snn::api::iflush,    snn::api::test,         snn::api::close_send, snn::api::close_recv,
    snn::api::close_listen, nullptr,             nullptr,              nullptr,
};

__attribute__((visibility("default"))) snn::abi::NetV11 ncclNetPlugin_v11 = {
    snn::kName,          snn::init_v11,          snn::api::devices,    snn::get_properties,
    snn::api::listen,    snn::api::connect,      snn::api::accept,     snn::api::reg_mr,
    snn::api::reg_mr_dmabuf, snn::api::dereg_mr, snn::isend_v10,       snn::irecv_v10,
    snn::api::iflush,    snn::api::test,         snn::api::close_send, snn::api::close_recv,
    snn::api::close_listen, nullptr,             nullptr,              nullptr,
    snn::api::finalize,  nullptr,
};

}  // extern "C"
