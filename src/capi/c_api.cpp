// The C ABI of include/strata/strata.h over the C++ API.
//
// Every entry point runs its body through guarded(), which turns any exception into a
// strataResult_t (via translate() in c_api_errors.cpp) and records the message, so no
// C++ exception ever crosses into C.
//
// Handles are not addresses: strataComm_t and strataRequest_t carry ids looked up in one
// table. A stale, foreign or garbage handle is then reported instead of dereferenced,
// and strataCommAbort from a watchdog thread can release a communicator while another
// thread is still blocked in a call on it: that call holds its own reference.
//
// This file holds the communicator's entry points; c_api_ops.cpp the operations and
// requests; handles.hpp the machinery both use.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "capi/handles.hpp"

extern "C" {

strataResult_t strataGetVersion(int* version) noexcept {
  return guarded(__func__, [&](Call&) {
    require_out(version, "version");
    *version = STRATA_VERSION_CODE;
    return strataSuccess;
  });
}

strataResult_t strataGetUniqueId(strataUniqueId* uniqueId) noexcept {
  return guarded(__func__, [&](Call&) {
    require_out(uniqueId, "uniqueId");
    const strata::UniqueId id = strata::UniqueId::create();
    std::memcpy(uniqueId->internal, id.bytes.data(), sizeof uniqueId->internal);
    return strataSuccess;
  });
}

strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId commId,
                                  int rank) noexcept {
  return strata::capi::init_rank(__func__, comm, nranks, commId, rank, nullptr);
}

strataResult_t strataCommInitRankConfig(strataComm_t* comm, int nranks, strataUniqueId commId,
                                        int rank, const strataConfig_t* config) noexcept {
  return strata::capi::init_rank(__func__, comm, nranks, commId, rank, config);
}

strataResult_t strataCommInitFromEnv(strataComm_t* comm) noexcept {
  return guarded(__func__, [&](Call&) {
    require_out(comm, "comm");
    *comm = nullptr;
    *comm = registry().add(
        std::make_shared<strata::capi::CommState>(strata::Communicator::from_env()));
    return strataSuccess;
  });
}

strataResult_t strataIsServerProcess(int* isServer) noexcept {
  return guarded(__func__, [&](Call&) {
    require_out(isServer, "isServer");
    *isServer = strata::is_server_process() ? 1 : 0;
    return strataSuccess;
  });
}

strataResult_t strataServeFromEnv(void) noexcept {
  return guarded(__func__, [&](Call&) {
    strata::serve_from_env();
    return strataSuccess;
  });
}

strataResult_t strataCommDestroy(strataComm_t comm) noexcept {
  return guarded(__func__, [&](Call& call) {
    if (comm == nullptr) return strataSuccess;
    call.comm(comm);  // reports a stale handle with the usual message
    auto state = registry().take(comm);
    if (!state) invalid("comm is not a live communicator (destroyed concurrently)");
    state->drain();
    return strataSuccess;
  });
}

strataResult_t strataCommAbort(strataComm_t comm) noexcept {
  return guarded(__func__, [&](Call& call) {
    if (comm == nullptr) return strataSuccess;
    call.comm(comm);
    auto state = registry().take(comm);
    if (!state) invalid("comm is not a live communicator (destroyed concurrently)");
    state->comm().abort();
    return strataSuccess;
  });
}

strataResult_t strataCommShrink(strataComm_t comm, const int* excludeRanks, int excludeCount,
                                strataComm_t* newcomm) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(newcomm, "newcomm");
    *newcomm = nullptr;
    if (excludeCount < 0) invalid("excludeCount is " + std::to_string(excludeCount));
    if (excludeCount > 0 && excludeRanks == nullptr) invalid("excludeRanks is NULL but excludeCount is " + std::to_string(excludeCount));
    const std::span<const int> excluded(excludeRanks, static_cast<std::size_t>(excludeCount));
    *newcomm = registry().add(std::make_shared<strata::capi::CommState>(state->comm().shrink(excluded)));
    return strataSuccess;
  });
}

strataResult_t strataCommGetLostRanks(strataComm_t comm, int* ranks, int capacity, int* count) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(count, "count");
    if (capacity < 0) invalid("capacity is " + std::to_string(capacity));
    if (capacity > 0) require_out(ranks, "ranks");
    const std::vector<int> lost = state->comm().lost_ranks();
    std::copy_n(lost.begin(), std::min(lost.size(), static_cast<std::size_t>(capacity)), ranks);
    *count = static_cast<int>(lost.size());
    return strataSuccess;
  });
}

strataResult_t strataCommSetStream(strataComm_t comm, void* stream) noexcept {
  return guarded(__func__, [&](Call& call) {
    call.comm(comm)->set_stream(stream);
    return strataSuccess;
  });
}

strataResult_t strataCommCount(const strataComm_t comm, int* count) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(count, "count");
    *count = state->comm().size();
    return strataSuccess;
  });
}

strataResult_t strataCommUserRank(const strataComm_t comm, int* rank) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(rank, "rank");
    *rank = state->comm().rank();
    return strataSuccess;
  });
}

strataResult_t strataCommGetAsyncError(strataComm_t comm, strataResult_t* asyncError) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(asyncError, "asyncError");
    const bool running = state->poll_outstanding();
    const strataResult_t e = state->async_error();
    *asyncError = e != strataSuccess ? e : running ? strataInProgress : strataSuccess;
    return strataSuccess;
  });
}

strataResult_t strataCommGetTraffic(strataComm_t comm, strataTrafficStats_t* stats) noexcept {
  return guarded(__func__, [&](Call& call) {
    auto state = call.comm(comm);
    require_out(stats, "stats");
    if (stats->size < offsetof(strataTrafficStats_t, wan_wire_bytes_sent))
      throw strata::InvalidArgument("stats->size is " + std::to_string(stats->size) +
                                    "; start from STRATA_TRAFFIC_STATS_INITIALIZER");
    const strata::TrafficStats t = state->comm().traffic();
    const strataTrafficStats_t full{sizeof full,         t.wan_bytes_sent,       t.wan_wire_bytes_sent,
                                    t.wan_bytes_received, t.wan_bytes_resent,     t.device_to_host_bytes,
                                    t.host_to_device_bytes};
    const std::size_t known = std::min(stats->size, sizeof full);
    std::memcpy(reinterpret_cast<char*>(stats) + sizeof(std::size_t),
                reinterpret_cast<const char*>(&full) + sizeof(std::size_t), known - sizeof(std::size_t));
    return strataSuccess;
  });
}

const char* strataGetLastError(strataComm_t comm) noexcept {
  if (comm == nullptr) return strata::capi::thread_error();
  auto state = registry().find(comm);
  if (!state) return "strataGetLastError: comm is not a live communicator";
  return state->last_error_copy();
}

}  // extern "C"
