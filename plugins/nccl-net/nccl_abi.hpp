// The NCCL net plugin ABI, versions 8 to 11, written from the facts in
// shared/reference/nccl-net-abi.md (NCCL 2.28.9). Only layouts matter to NCCL, so the
// names are ours and live in a namespace; the exported tables get their C names in
// abi_tables.cpp. The static_asserts pin the x86-64 layouts the reference describes, so a
// field added in the wrong place fails the build instead of corrupting NCCL's view.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::nccl_net::abi {

// ncclResult_t (a C enum, passed as int).
enum Result : int {
  success = 0,
  unhandled_cuda_error = 1,
  system_error = 2,    // network or OS failure
  internal_error = 3,  // NCCL misused the plugin
  invalid_argument = 4,
  invalid_usage = 5,   // user or configuration error
  remote_error = 6,    // the peer went away or broke the protocol
};

// ncclDebugLogLevel values and the NCCL_NET subsystem flag.
enum LogLevel : int { log_none = 0, log_version = 1, log_warn = 2, log_info = 3, log_abort = 4, log_trace = 5 };
inline constexpr unsigned long kSubsysNet = 0x10;

using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
using ProfilerCallback = Result (*)(void** event, int type, void* parent, std::int64_t plugin_id,
                                    void* ext_data);

inline constexpr int kHandleMaxSize = 128;  // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kPtrHost = 0x1, kPtrCuda = 0x2, kPtrDmaBuf = 0x4;
inline constexpr int kMaxRequests = 32;    // NCCL_NET_MAX_REQUESTS, per comm (x maxRecvs on send)
inline constexpr int kDeviceHost = 0;      // ncclNetDeviceType HOST
inline constexpr int kDeviceInvalidVersion = 0;
inline constexpr int kMaxDevsPerNic = 4;   // NCCL_NET_MAX_DEVS_PER_NIC
// NCCL stores this in *request before an irecv whose completion it may skip (LL/LL128).
inline void* const kOptionalRecvCompletion = reinterpret_cast<void*>(0x1);

struct DeviceHandle;  // ncclNetDeviceHandle_vN_t: device offload only, never created here

struct VDeviceProps {
  int ndevs;
  int devs[kMaxDevsPerNic];
};

struct CommConfig {  // ncclNetCommConfig_v10_t / _v11_t
  int trafficClass;
};

struct CommAttr {
  std::int32_t maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer, minFlowsPerPeer;
};
struct NetAttr {  // ncclNetAttr_v11_t
  CommAttr sendCommAttr, recvCommAttr;
  std::uint32_t op, algo, proto;
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  std::uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

// v9 and v10 share this layout.
struct PropertiesV9 {
  char* name;
  char* pciPath;
  std::uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps vProps;
  std::size_t maxP2pBytes;
  std::size_t maxCollBytes;
};
using PropertiesV10 = PropertiesV9;

struct PropertiesV11 {
  char* name;
  char* pciPath;
  std::uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps vProps;
  std::size_t maxP2pBytes;
  std::size_t maxCollBytes;
  int maxMultiRequestSize;
};

// Function table shapes, field order as in the reference (sections 1.4 and 1.5).
struct NetV8 {
  const char* name;
  Result (*init)(Logger log);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*regMr)(void* comm, void* data, std::size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, std::size_t size, int type, std::uint64_t offset,
                        int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                  void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* send_comm);
  Result (*closeRecv)(void* recv_comm);
  Result (*closeListen)(void* listen_comm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recv_comm, int n, void* request);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger log);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*regMr)(void* comm, void* data, std::size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, std::size_t size, int type, std::uint64_t offset,
                        int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, std::size_t size, int tag, void* mhandle,
                  void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, std::size_t* sizes, int* tags,
                  void** mhandles, void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* send_comm);
  Result (*closeRecv)(void* recv_comm);
  Result (*closeListen)(void* listen_comm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recv_comm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger log, ProfilerCallback prof);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV10* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, CommConfig* config, void* handle, void** send_comm,
                    DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*regMr)(void* comm, void* data, std::size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, std::size_t size, int type, std::uint64_t offset,
                        int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, std::size_t size, int tag, void* mhandle,
                  void* phandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, std::size_t* sizes, int* tags,
                  void** mhandles, void** phandles, void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* send_comm);
  Result (*closeRecv)(void* recv_comm);
  Result (*closeListen)(void* listen_comm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recv_comm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps* props);
};

struct NetV11 {
  const char* name;
  Result (*init)(void** ctx, std::uint64_t comm_id, CommConfig* config, Logger log,
                 ProfilerCallback prof);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  Result (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                    DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*regMr)(void* comm, void* data, std::size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, std::size_t size, int type, std::uint64_t offset,
                        int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, std::size_t size, int tag, void* mhandle,
                  void* phandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, std::size_t* sizes, int* tags,
                  void** mhandles, void** phandles, void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* send_comm);
  Result (*closeRecv)(void* recv_comm);
  Result (*closeListen)(void* listen_comm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recv_comm, int n, void* request);
  Result (*makeVDevice)(int* d, VDeviceProps* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttr* attr);
};

// x86-64 layouts: 8-byte pointers and size_t, 4-byte int and float.
static_assert(sizeof(Result) == 4);
static_assert(offsetof(PropertiesV8, speed) == 32 && offsetof(PropertiesV8, latency) == 40 &&
              offsetof(PropertiesV8, netDeviceVersion) == 56 && sizeof(PropertiesV8) == 64);
static_assert(offsetof(PropertiesV9, forceFlush) == 32 && offsetof(PropertiesV9, speed) == 36 &&
              offsetof(PropertiesV9, vProps) == 64 && offsetof(PropertiesV9, maxP2pBytes) == 88 &&
              sizeof(PropertiesV9) == 104);
static_assert(offsetof(PropertiesV11, maxMultiRequestSize) == 104 && sizeof(PropertiesV11) == 112);
static_assert(sizeof(NetV8) == 19 * sizeof(void*) && sizeof(NetV9) == 20 * sizeof(void*) &&
              sizeof(NetV10) == 20 * sizeof(void*) && sizeof(NetV11) == 22 * sizeof(void*));
static_assert(offsetof(NetV11, finalize) == 20 * sizeof(void*));

}  // namespace strata::nccl_net::abi
