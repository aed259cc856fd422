/* Compiled as C99 with -pedantic -Werror and never run: it proves include/strata/strata.h
 * is a C header, and that its prototypes have the shapes documented (a changed signature
 * fails the pointer assignments below). */
#include "strata/strata.h"

typedef char strata_check_id_size[sizeof(strataUniqueId) == STRATA_UNIQUE_ID_BYTES ? 1 : -1];
typedef char strata_check_version[STRATA_VERSION_CODE == STRATA_VERSION(0, 1, 0) ? 1 : -1];
typedef char strata_check_aliases[(strataFloat == strataFloat32 && strataDouble == strataFloat64 &&
                                   strataHalf == strataFloat16)
                                      ? 1
                                      : -1];

strataResult_t strata_check_shapes(void);

strataResult_t strata_check_shapes(void) {
  strataConfig_t config = STRATA_CONFIG_INITIALIZER;
  strataTrafficStats_t stats = STRATA_TRAFFIC_STATS_INITIALIZER;
  strataResult_t (*all_reduce)(const void*, void*, size_t, strataDataType_t, strataRedOp_t,
                               strataComm_t, strataRequest_t*) = strataAllReduce;
  strataResult_t (*reduce_scatter)(const void*, void*, size_t, strataDataType_t, strataRedOp_t,
                                   strataComm_t, strataRequest_t*) = strataReduceScatter;
  strataResult_t (*all_gather)(const void*, void*, size_t, strataDataType_t, strataComm_t,
                               strataRequest_t*) = strataAllGather;
  strataResult_t (*broadcast)(const void*, void*, size_t, strataDataType_t, int, strataComm_t,
                              strataRequest_t*) = strataBroadcast;
  strataResult_t (*reduce)(const void*, void*, size_t, strataDataType_t, strataRedOp_t, int,
                           strataComm_t, strataRequest_t*) = strataReduce;
  strataResult_t (*barrier)(strataComm_t, strataRequest_t*) = strataBarrier;
  strataResult_t (*send)(const void*, size_t, strataDataType_t, int, strataComm_t,
                         strataRequest_t*) = strataSend;
  strataResult_t (*recv)(void*, size_t, strataDataType_t, int, strataComm_t,
                         strataRequest_t*) = strataRecv;
  strataResult_t (*init_rank)(strataComm_t*, int, strataUniqueId, int) = strataCommInitRank;
  strataResult_t (*init_config)(strataComm_t*, int, strataUniqueId, int, const strataConfig_t*) =
      strataCommInitRankConfig;
  strataResult_t (*init_env)(strataComm_t*) = strataCommInitFromEnv;
  strataResult_t (*test)(strataRequest_t, int*) = strataTest;
  strataResult_t (*wait)(strataRequest_t) = strataWait;
  strataResult_t (*request_free)(strataRequest_t) = strataRequestFree;
  strataResult_t (*async_error)(strataComm_t, strataResult_t*) = strataCommGetAsyncError;
  const char* (*error_string)(strataResult_t) = strataGetErrorString;
  const char* (*last_error)(strataComm_t) = strataGetLastError;
  strataResult_t (*destroy)(strataComm_t) = strataCommDestroy;
  strataResult_t (*abort_comm)(strataComm_t) = strataCommAbort;
  strataResult_t (*count)(const strataComm_t, int*) = strataCommCount;
  strataResult_t (*user_rank)(const strataComm_t, int*) = strataCommUserRank;
  strataResult_t (*traffic)(strataComm_t, strataTrafficStats_t*) = strataCommGetTraffic;
  strataResult_t (*version)(int*) = strataGetVersion;
  strataResult_t (*unique_id)(strataUniqueId*) = strataGetUniqueId;

  (void)all_reduce; (void)reduce_scatter; (void)all_gather; (void)broadcast; (void)reduce;
  (void)barrier; (void)send; (void)recv; (void)init_rank; (void)init_config; (void)init_env;
  (void)test; (void)wait; (void)request_free; (void)async_error; (void)error_string;
  (void)last_error; (void)destroy; (void)abort_comm; (void)count; (void)user_rank;
  (void)version; (void)unique_id; (void)traffic;
  return config.size == sizeof(strataConfig_t) && config.transport == strataTransportAuto &&
                 config.timeout_ms == 0 && stats.size == sizeof(strataTrafficStats_t)
             ? strataSuccess
             : strataInternalError;
}
