/*
 * strata C ABI, in the shapes of NCCL's API (nccl.h) with the prefix "strata".
 *
 * Differences from NCCL, all deliberate:
 *   - Each collective takes a trailing strataRequest_t* instead of a CUDA stream: NULL
 *     makes the call block until the operation finished; otherwise the call returns at
 *     once with a request to pass to strataTest / strataWait and then strataRequestFree.
 *   - Buffers are host memory, or CUDA device memory (found from the pointers; one call's
 *     buffers all of one kind), and must stay valid until the operation completed. Calls
 *     on device buffers are ordered on the stream of strataCommSetStream; send and recv
 *     take host memory only.
 *   - Every function reports failure through its return value and never aborts the
 *     process; strataGetLastError gives the message that goes with a failed call.
 *
 * Threads: strataCommAbort, strataCommGetAsyncError, strataGetLastError and the request
 * functions may be called from any thread. Issuing operations on one communicator from
 * several threads at once is not supported, as in NCCL: ranks must issue in one order.
 *
 * Handles are checked on every call: a NULL, destroyed or foreign handle yields
 * strataInvalidArgument, not a crash.
 *
 * The header is C99 and C++ compatible.
 */
#ifndef STRATA_STRATA_H_
#define STRATA_STRATA_H_

#include <stddef.h>
#include <stdint.h>

#define STRATA_MAJOR 0
#define STRATA_MINOR 1
#define STRATA_PATCH 0
#define STRATA_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define STRATA_VERSION_CODE STRATA_VERSION(STRATA_MAJOR, STRATA_MINOR, STRATA_PATCH)

#if defined(__GNUC__)
#define STRATA_API __attribute__((visibility("default")))
#else
#define STRATA_API
#endif

/* The definitions are noexcept; C++ requires declarations to say so too. */
#if defined(__cplusplus)
#define STRATA_NOEXCEPT noexcept
#else
#define STRATA_NOEXCEPT
#endif

/* In C any int converts to these enums. In C++ an enum without a fixed underlying type
 * may only hold values within its enumerators' bit range, so a C++ caller (or the library)
 * merely reading an out-of-range value would be undefined; fixing the type to int makes
 * every int a valid value that the library can reject with strataInvalidArgument. The
 * size and passing convention are those of the C enum. */
#if defined(__cplusplus)
#define STRATA_ENUM_INT : int
#else
#define STRATA_ENUM_INT
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strataComm* strataComm_t;
typedef struct strataRequest* strataRequest_t;

#define STRATA_UNIQUE_ID_BYTES 128
/* Bootstrap address: filled by strataGetUniqueId in one process (which must stay alive
 * until every rank has joined) and copied to every rank out of band. */
typedef struct {
  char internal[STRATA_UNIQUE_ID_BYTES];
} strataUniqueId;

typedef enum STRATA_ENUM_INT {
  strataSuccess = 0,
  strataInvalidArgument = 1, /* rejected before anything was sent; comm still usable */
  strataMismatch = 2,        /* ranks issued different operations at the same position */
  strataTimeout = 3,         /* a peer did not answer before the deadline */
  strataAborted = 4,         /* the communicator was aborted, or an earlier operation failed */
  strataTransportError = 5,  /* a connection failed or a message did not fit */
  strataInternalError = 6,
  strataInProgress = 7,      /* strataTest, strataCommGetAsyncError: not finished yet */
  strataPeerLost = 8,        /* a rank died or stopped answering; strataCommGetLostRanks names it */
  strataQuorumLost = 9,      /* strataCommShrink: too few ranks left to go on (a partition's minority) */
  strataNumResults = 10
} strataResult_t;

typedef enum STRATA_ENUM_INT {
  strataFloat32 = 0,
  strataFloat64 = 1,
  strataFloat16 = 2,
  strataBfloat16 = 3,
  strataInt8 = 4,
  strataUint8 = 5,
  strataInt32 = 6,
  strataInt64 = 7,
  strataNumTypes = 8,
  strataFloat = strataFloat32,
  strataDouble = strataFloat64,
  strataHalf = strataFloat16
} strataDataType_t;

/* strataAvg is defined for floating types only. */
typedef enum STRATA_ENUM_INT {
  strataSum = 0,
  strataProd = 1,
  strataMin = 2,
  strataMax = 3,
  strataAvg = 4,
  strataNumOps = 5
} strataRedOp_t;

/* Values of strataConfig_t.transport. */
enum {
  strataTransportAuto = 0, /* STRATA_TRANSPORT, else UCX */
  strataTransportUcx = 1,
  strataTransportTcp = 2
};

/* Always start from STRATA_CONFIG_INITIALIZER: size lets a newer library tell which
 * fields a program compiled against an older header knows about. */
typedef struct {
  size_t size;
  int transport;  /* strataTransportAuto / Ucx / Tcp */
  int timeout_ms; /* bootstrap and per-operation deadline; 0: STRATA_TIMEOUT_S */
} strataConfig_t;

#define STRATA_CONFIG_INITIALIZER \
  { sizeof(strataConfig_t), strataTransportAuto, 0 }

/* STRATA_VERSION_CODE of the library actually loaded. */
STRATA_API strataResult_t strataGetVersion(int* version) STRATA_NOEXCEPT;

/* Starts a rendezvous store in the calling process. */
STRATA_API strataResult_t strataGetUniqueId(strataUniqueId* uniqueId) STRATA_NOEXCEPT;

/* Collective over nranks processes: blocks until all of them have joined or the timeout
 * passed. On failure *comm is set to NULL. */
STRATA_API strataResult_t strataCommInitRank(strataComm_t* comm, int nranks,
                                             strataUniqueId commId, int rank) STRATA_NOEXCEPT;
/* config may be NULL (defaults). */
STRATA_API strataResult_t strataCommInitRankConfig(strataComm_t* comm, int nranks,
                                                   strataUniqueId commId, int rank,
                                                   const strataConfig_t* config) STRATA_NOEXCEPT;
/* Rank, size and rendezvous from STRATA_RANK / STRATA_WORLD_SIZE / STRATA_ROOT, then
 * torchrun's, Open MPI's and Slurm's variables. */
STRATA_API strataResult_t strataCommInitFromEnv(strataComm_t* comm) STRATA_NOEXCEPT;

/* Dedicated parameter servers (strata/server.hpp): *isServer is 1 when STRATA_ROLE=server,
 * in which case the program calls strataServeFromEnv instead of creating a communicator;
 * it returns once every worker has destroyed its communicator. */
STRATA_API strataResult_t strataIsServerProcess(int* isServer) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataServeFromEnv(void) STRATA_NOEXCEPT;

/* Waits for the operations still outstanding on comm (each bounded by the timeout), then
 * releases it. Requests obtained from comm stay valid until freed. NULL is a no-op. */
STRATA_API strataResult_t strataCommDestroy(strataComm_t comm) STRATA_NOEXCEPT;
/* Fails every outstanding operation with strataAborted and releases comm without waiting,
 * as ncclCommAbort does; the handle is invalid afterwards. A thread blocked in a call on
 * comm returns strataAborted. NULL is a no-op. */
STRATA_API strataResult_t strataCommAbort(strataComm_t comm) STRATA_NOEXCEPT;

/* Fault tolerance. After a rank dies or stops answering, operations on comm fail with
 * strataPeerLost on every survivor; strataCommGetLostRanks names the lost ranks. Every
 * survivor then calls strataCommShrink with the same list (as ncclCommShrink) and gets a
 * communicator of the survivors, ranks renumbered densely in their old order, without a
 * new rendezvous; a survivor passing a different list gets strataMismatch, as do the
 * others. Only more than half of comm's ranks go on (exactly half where STRATA_ARBITER's
 * store names them): the others get strataQuorumLost. comm stays as it was: destroy it
 * afterwards. */
STRATA_API strataResult_t strataCommShrink(strataComm_t comm, const int* excludeRanks, int excludeCount,
                                           strataComm_t* newcomm) STRATA_NOEXCEPT;
/* Writes up to capacity lost ranks (ascending) to ranks and their number to *count,
 * which may exceed capacity. */
STRATA_API strataResult_t strataCommGetLostRanks(strataComm_t comm, int* ranks, int capacity,
                                                 int* count) STRATA_NOEXCEPT;

/* The cudaStream_t (passed as void*) that later collectives on device buffers of comm
 * are ordered on: each reads its input after the work enqueued on the stream before the
 * call, and work enqueued after the call waits, on the device, for its results. NULL (the
 * default): the default stream. Calls on host buffers ignore it. */
STRATA_API strataResult_t strataCommSetStream(strataComm_t comm, void* stream) STRATA_NOEXCEPT;

STRATA_API strataResult_t strataCommCount(const strataComm_t comm, int* count) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataCommUserRank(const strataComm_t comm,
                                             int* rank) STRATA_NOEXCEPT;

/* Sets *asyncError to the first failure of an operation on comm (strataInvalidArgument
 * does not count: it leaves the communicator usable), else strataInProgress while any
 * non-blocking operation is outstanding, else strataSuccess. Never blocks. */
STRATA_API strataResult_t strataCommGetAsyncError(strataComm_t comm,
                                                  strataResult_t* asyncError) STRATA_NOEXCEPT;

/* Bytes this rank moved over the inter-region (WAN) link, cumulative since comm was
 * created; other ranks' figures are not included. The WAN fields are zero when comm does
 * not span regions or STRATA_WAN_LINK=0. Start from STRATA_TRAFFIC_STATS_INITIALIZER: size lets a
 * newer library fill only the fields an older caller knows. */
typedef struct {
  size_t size;
  uint64_t wan_bytes_sent;      /* message payload handed to the WAN link */
  uint64_t wan_wire_bytes_sent; /* written to WAN sockets: payload, headers, acks, resends */
  uint64_t wan_bytes_received;  /* message payload received over the WAN link */
  uint64_t wan_bytes_resent;    /* payload written again after a stream broke */
  uint64_t device_to_host_bytes; /* collectives on device buffers: staged to the host */
  uint64_t host_to_device_bytes; /* and back */
} strataTrafficStats_t;

#define STRATA_TRAFFIC_STATS_INITIALIZER { sizeof(strataTrafficStats_t), 0, 0, 0, 0, 0, 0 }

/* Never blocks; may be called from any thread. */
STRATA_API strataResult_t strataCommGetTraffic(strataComm_t comm,
                                               strataTrafficStats_t* stats) STRATA_NOEXCEPT;

/* Static text naming the code. */
STRATA_API const char* strataGetErrorString(strataResult_t result) STRATA_NOEXCEPT;
/* comm NULL: the message of the calling thread's latest call into strata, "" when that
 * call succeeded (or returned strataInProgress). comm given: the message of the latest
 * failure on comm from any thread, non-blocking operations' failures included, "" once
 * an operation issued on comm after it succeeded. Messages name the entry point, and
 * for collectives the operation and its sequence number ("allreduce #12 (f32 x 1000,
 * sum) on rank 3: ..."). The string stays valid until the calling thread's next call
 * into strata. */
STRATA_API const char* strataGetLastError(strataComm_t comm) STRATA_NOEXCEPT;

/* Collectives. recvbuff may equal sendbuff (in place). count is per rank except for
 * strataReduceScatter (sendbuff holds nranks * recvcount) and strataAllGather (recvbuff
 * holds nranks * sendcount). req NULL: block until done; else see strataTest. */
STRATA_API strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          strataDataType_t datatype, strataRedOp_t op,
                                          strataComm_t comm, strataRequest_t* req) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, strataDataType_t datatype,
                                              strataRedOp_t op, strataComm_t comm,
                                              strataRequest_t* req) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          strataDataType_t datatype, strataComm_t comm,
                                          strataRequest_t* req) STRATA_NOEXCEPT;
/* sendbuff is read on root only and may be NULL elsewhere. */
STRATA_API strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          strataDataType_t datatype, int root, strataComm_t comm,
                                          strataRequest_t* req) STRATA_NOEXCEPT;
/* recvbuff is written on root only and may be NULL elsewhere. */
STRATA_API strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       strataDataType_t datatype, strataRedOp_t op, int root,
                                       strataComm_t comm, strataRequest_t* req) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataBarrier(strataComm_t comm, strataRequest_t* req) STRATA_NOEXCEPT;

/* Every rank sends count elements to each rank: block j of sendbuff goes to rank j and
 * lands in block rank of its recvbuff; both hold nranks * count elements. recvbuff may
 * equal sendbuff. */
STRATA_API strataResult_t strataAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         strataDataType_t datatype, strataComm_t comm,
                                         strataRequest_t* req) STRATA_NOEXCEPT;
/* Uneven splits, as MPI_Alltoallv: sendcounts[j] elements at sendbuff + sdispls[j] go to
 * rank j; recvcounts[j] elements from rank j land at recvbuff + rdispls[j]. Each array
 * holds nranks entries, in elements. Rank i's sendcounts[j] must equal rank j's
 * recvcounts[i]. */
STRATA_API strataResult_t strataAllToAllv(const void* sendbuff, const size_t* sendcounts,
                                          const size_t* sdispls, void* recvbuff,
                                          const size_t* recvcounts, const size_t* rdispls,
                                          strataDataType_t datatype, strataComm_t comm,
                                          strataRequest_t* req) STRATA_NOEXCEPT;

/* Point to point: sends to one peer are matched by that peer's receives in order. */
STRATA_API strataResult_t strataSend(const void* sendbuff, size_t count,
                                     strataDataType_t datatype, int peer, strataComm_t comm,
                                     strataRequest_t* req) STRATA_NOEXCEPT;
STRATA_API strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype,
                                     int peer, strataComm_t comm,
                                     strataRequest_t* req) STRATA_NOEXCEPT;
/* From whichever rank's message arrives first (MPI_ANY_SOURCE): *source is that rank once
 * the request is done, and must stay valid until then. Receives issued after it wait at
 * issue until it has matched a message. */
STRATA_API strataResult_t strataRecvAny(void* recvbuff, size_t count, strataDataType_t datatype,
                                        int* source, strataComm_t comm,
                                        strataRequest_t* req) STRATA_NOEXCEPT;

/* Never blocks. Running: *done = 0, returns strataInProgress. Finished: *done = 1,
 * returns the operation's result. */
STRATA_API strataResult_t strataTest(strataRequest_t req, int* done) STRATA_NOEXCEPT;
/* Blocks until the operation finished; returns its result (again on every call). */
STRATA_API strataResult_t strataWait(strataRequest_t req) STRATA_NOEXCEPT;
/* Releases the handle. An operation still running keeps running, like MPI_Request_free:
 * its buffers must stay valid, and strataCommDestroy still waits for it. NULL is a no-op. */
STRATA_API strataResult_t strataRequestFree(strataRequest_t req) STRATA_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_STRATA_H_ */
