// The plugin's one implementation, with the newest ABI's (v11) semantics. Every function
// is noexcept and returns an ncclResult_t; each body runs under guarded(), so whatever
// is thrown is logged and translated in one place (errors.cpp). The per-version tables
// in abi_tables.cpp only adapt argument shapes to these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_abi.hpp"

namespace strata::nccl_net::api {

// v11: once per communicator, with a context that finalize() releases. Older versions
// are initialised once per process by NCCL and pass ctx == nullptr.
abi::Result init(void** ctx, std::uint64_t comm_id, int traffic_class, abi::Logger log) noexcept;
abi::Result finalize(void* ctx) noexcept;
abi::Result devices(int* ndev) noexcept;
// Newest layout; name/pciPath stay valid for the plugin's lifetime.
abi::Result get_properties(int dev, abi::PropertiesV11* props) noexcept;
abi::Result listen(void* ctx, int dev, void* handle, void** listen_comm) noexcept;
abi::Result connect(void* ctx, int dev, void* handle, void** send_comm, abi::DeviceHandle** dev_comm) noexcept;
abi::Result accept(void* listen_comm, void** recv_comm, abi::DeviceHandle** dev_comm) noexcept;
abi::Result reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) noexcept;
abi::Result reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset,
                          int fd, void** mhandle) noexcept;
abi::Result dereg_mr(void* comm, void* mhandle) noexcept;
abi::Result isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle,
                  void** request) noexcept;
abi::Result irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, int* tags,
                  void** mhandles, void** request) noexcept;
abi::Result iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                   void** request) noexcept;
abi::Result test(void* request, int* done, int* sizes) noexcept;
abi::Result close_send(void* send_comm) noexcept;
abi::Result close_recv(void* recv_comm) noexcept;
abi::Result close_listen(void* listen_comm) noexcept;

}  // namespace strata::nccl_net::api
