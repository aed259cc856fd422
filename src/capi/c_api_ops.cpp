// The C ABI's collectives, point-to-point calls and request calls (strata.h); see
// c_api.cpp for how entry points run.
#include "capi/handles.hpp"

extern "C" {

strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                               strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    const auto o = to_cpp(op);
    require_buffer(sendbuff, count, "sendbuff");
    require_buffer(recvbuff, count, "recvbuff");
    return c.allreduce(sendbuff, recvbuff, count, dt, o, co);
  });
}

strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op,
                                   strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    const auto o = to_cpp(op);
    require_buffer(sendbuff, recvcount, "sendbuff");
    require_buffer(recvbuff, recvcount, "recvbuff");
    return c.reduce_scatter(sendbuff, recvbuff, recvcount, dt, o, co);
  });
}

strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm,
                               strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    require_buffer(sendbuff, sendcount, "sendbuff");
    require_buffer(recvbuff, sendcount, "recvbuff");
    return c.allgather(sendbuff, recvbuff, sendcount, dt, co);
  });
}

strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm,
                               strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    if (root == c.rank()) require_buffer(sendbuff, count, "sendbuff (on root)");
    require_buffer(recvbuff, count, "recvbuff");
    return c.broadcast(sendbuff, recvbuff, count, dt, root, co);
  });
}

strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root,
                            strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    const auto o = to_cpp(op);
    require_buffer(sendbuff, count, "sendbuff");
    if (root == c.rank()) require_buffer(recvbuff, count, "recvbuff (on root)");
    return c.reduce(sendbuff, recvbuff, count, dt, o, root, co);
  });
}

strataResult_t strataBarrier(strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req,
               [&](strata::Communicator& c, const strata::CallOptions& co) { return c.barrier(co); });
}

strataResult_t strataAllToAll(const void* sendbuff, void* recvbuff, size_t count, strataDataType_t datatype,
                              strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    require_buffer(sendbuff, count, "sendbuff");
    require_buffer(recvbuff, count, "recvbuff");
    return c.alltoall(sendbuff, recvbuff, count, dt, co);
  });
}

strataResult_t strataAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                               void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                               strataDataType_t datatype, strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    const auto n = static_cast<std::size_t>(c.size());
    require_buffer(sendcounts, n, "sendcounts");
    require_buffer(sdispls, n, "sdispls");
    require_buffer(recvcounts, n, "recvcounts");
    require_buffer(rdispls, n, "rdispls");
    return c.alltoallv(sendbuff, {sendcounts, n}, {sdispls, n}, recvbuff, {recvcounts, n}, {rdispls, n}, dt, co);
  });
}

strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    require_buffer(sendbuff, count, "sendbuff");
    return c.send(sendbuff, count, dt, peer, co);
  });
}

strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    require_buffer(recvbuff, count, "recvbuff");
    return c.recv(recvbuff, count, dt, peer, co);
  });
}

strataResult_t strataRecvAny(void* recvbuff, size_t count, strataDataType_t datatype, int* source,
                             strataComm_t comm, strataRequest_t* req) noexcept {
  return issue(__func__, comm, req, [&](strata::Communicator& c, const strata::CallOptions& co) {
    const auto dt = to_cpp(datatype);
    require_buffer(recvbuff, count, "recvbuff");
    require_out(source, "source");
    return c.recv_any(recvbuff, count, dt, source, co);
  });
}

strataResult_t strataTest(strataRequest_t req, int* done) noexcept {
  return guarded(__func__, [&](Call&) {
    auto r = Call::request(req);
    require_out(done, "done");
    *done = 0;
    if (!r->poll()) return strataInProgress;
    *done = 1;
    r->rethrow();
    return strataSuccess;
  });
}

strataResult_t strataWait(strataRequest_t req) noexcept {
  return guarded(__func__, [&](Call&) {
    auto r = Call::request(req);
    r->wait();
    r->rethrow();
    return strataSuccess;
  });
}

strataResult_t strataRequestFree(strataRequest_t req) noexcept {
  return guarded(__func__, [&](Call&) {
    if (req == nullptr) return strataSuccess;
    if (!registry().take(req)) invalid("req is not a live request (freed or never issued)");
    return strataSuccess;
  });
}

}  // extern "C"
