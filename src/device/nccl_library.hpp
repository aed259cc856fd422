// NCCL as strata's GPU levels use it, opened at run time (libnccl.so.2: the copy a
// framework already loaded, such as torch's, is the one found). Declared with NCCL's
// stable C ABI so that libstrata needs no NCCL headers to build; tests/unit/
// test_device_abi.cpp checks the values against nccl.h where it is installed.
#pragma once

#include <cstddef>
#include <string>

#include "device/cuda_driver.hpp"
#include "strata/types.hpp"

namespace strata::device {

using NcclResult = int;
using NcclComm = void*;
struct NcclUniqueId {
  char internal[128];
};

inline constexpr NcclResult kNcclSuccess = 0;
inline constexpr NcclResult kNcclInProgress = 7;

struct NcclLibrary {
  NcclResult (*get_version)(int*);
  const char* (*get_error_string)(NcclResult);
  NcclResult (*get_unique_id)(NcclUniqueId*);
  NcclResult (*comm_init_rank)(NcclComm*, int nranks, NcclUniqueId id, int rank);
  NcclResult (*comm_abort)(NcclComm);
  NcclResult (*comm_destroy)(NcclComm);
  NcclResult (*comm_get_async_error)(NcclComm, NcclResult*);
  NcclResult (*all_reduce)(const void*, void*, std::size_t, int dtype, int op, NcclComm, CuStream);
  NcclResult (*reduce_scatter)(const void*, void*, std::size_t recvcount, int dtype, int op, NcclComm, CuStream);
  NcclResult (*all_gather)(const void*, void*, std::size_t sendcount, int dtype, NcclComm, CuStream);
  NcclResult (*broadcast)(const void*, void*, std::size_t, int dtype, int root, NcclComm, CuStream);
  NcclResult (*reduce)(const void*, void*, std::size_t, int dtype, int op, int root, NcclComm, CuStream);
  NcclResult (*send)(const void*, std::size_t, int dtype, int peer, NcclComm, CuStream);
  NcclResult (*recv)(void*, std::size_t, int dtype, int peer, NcclComm, CuStream);
  NcclResult (*group_start)();
  NcclResult (*group_end)();

  int version = 0;  // the library's NCCL_VERSION_CODE: 22703 for 2.27.3
  // Throws TransportError naming the call and `what` unless r is success.
  void check(NcclResult r, const char* call, const std::string& what) const;
};

// The process's NCCL: opened by the first call (from `path`, core's STRATA_NCCL_LIBRARY,
// when not empty, else libnccl.so.2), or null with why_no_nccl() saying why.
const NcclLibrary* nccl_library(const std::string& path = "");
const std::string& why_no_nccl();

// NCCL's codes for strata's types and operations: NCCL has every one (avg since 2.10).
int nccl_dtype(DataType dt);
int nccl_op(ReduceOp op);

}  // namespace strata::device
