// The C ABI's error side: the one translation from C++ failures to strataResult_t, the
// static text of each code, per-thread message storage, and the argument checks whose
// messages name the C arguments. c_api.cpp declares what it uses from here (no header:
// these are private to the two files); keep those declarations in step.
#include <chrono>
#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "strata/errors.hpp"
#include "strata/options.hpp"
#include "strata/strata.h"
#include "strata/types.hpp"

namespace strata::capi {

namespace {

// Per thread so that a failure on one thread never overwrites the message another thread
// is reading.
thread_local std::string tl_last_error;
// strataGetLastError(comm) hands out a copy: the communicator's own string may be
// replaced by another thread while the caller still reads the returned pointer.
thread_local std::string tl_comm_error_copy;

// A C caller may pass any int where an enum is expected; the header fixes the enums'
// underlying type to int for C++, so every such value is representable and checkable.
template <class E>
int raw_value(E e) {
  static_assert(std::is_same_v<std::underlying_type_t<E>, int>);
  return static_cast<int>(e);
}

}  // namespace

// Never throws: a message that cannot be stored is replaced by a short fixed one.
void assign_message(std::string& into, const char* fn, const char* what) noexcept {
  try {
    into.assign(fn).append(": ").append(what);
  } catch (...) {
    into.clear();
    // Short enough for the small-string buffer, so this cannot allocate.
    into.append("out of memory");
  }
}

// The single place where a C++ failure becomes a result code. *what points into the
// exception object, so it stays valid while the caller holds e.
strataResult_t translate(const std::exception_ptr& e, const char** what) noexcept {
  *what = "unknown failure";
  if (!e) return strataInternalError;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    *what = err.what();
    switch (err.code()) {
      case ErrorCode::invalid_argument: return strataInvalidArgument;
      case ErrorCode::mismatch: return strataMismatch;
      case ErrorCode::timeout: return strataTimeout;
      case ErrorCode::aborted: return strataAborted;
      case ErrorCode::transport: return strataTransportError;
      case ErrorCode::internal: return strataInternalError;
      case ErrorCode::peer_lost: return strataPeerLost;
      case ErrorCode::quorum_lost: return strataQuorumLost;
      case ErrorCode::ok: break;  // an Error that claims success is itself a bug
    }
    return strataInternalError;
  } catch (const std::bad_alloc&) {
    *what = "out of memory";
    return strataInternalError;
  } catch (const std::exception& ex) {
    *what = ex.what();
    return strataInternalError;
  } catch (...) {
    *what = "non-standard C++ exception";
    return strataInternalError;
  }
}

void set_thread_error(const char* fn, const char* what) noexcept {
  assign_message(tl_last_error, fn, what);
}

void clear_thread_error() noexcept { tl_last_error.clear(); }

const char* thread_error() noexcept { return tl_last_error.c_str(); }

// Caller holds whatever lock protects message.
const char* copy_for_caller(const std::string& message) noexcept {
  try {
    tl_comm_error_copy = message;
  } catch (...) {
    return "out of memory while copying the error message";
  }
  return tl_comm_error_copy.c_str();
}

// ---- argument checks ----

[[noreturn]] void invalid(const std::string& what) { throw InvalidArgument(what); }

void require_out(const void* p, const char* name) {
  if (p == nullptr) invalid(std::string(name) + " is NULL");
}

DataType to_cpp(strataDataType_t t) {
  switch (raw_value(t)) {
    case strataFloat32: return DataType::f32;
    case strataFloat64: return DataType::f64;
    case strataFloat16: return DataType::f16;
    case strataBfloat16: return DataType::bf16;
    case strataInt8: return DataType::i8;
    case strataUint8: return DataType::u8;
    case strataInt32: return DataType::i32;
    case strataInt64: return DataType::i64;
    default: break;
  }
  invalid("datatype " + std::to_string(raw_value(t)) + " is not a strataDataType_t (0.." +
          std::to_string(strataNumTypes - 1) + ")");
}

ReduceOp to_cpp(strataRedOp_t op) {
  switch (raw_value(op)) {
    case strataSum: return ReduceOp::sum;
    case strataProd: return ReduceOp::prod;
    case strataMin: return ReduceOp::min;
    case strataMax: return ReduceOp::max;
    case strataAvg: return ReduceOp::avg;
    default: break;
  }
  invalid("op " + std::to_string(raw_value(op)) + " is not a strataRedOp_t (0.." +
          std::to_string(strataNumOps - 1) + ")");
}

void require_buffer(const void* p, std::size_t count, const char* name) {
  if (p == nullptr && count > 0)
    invalid(std::string(name) + " is NULL but count is " + std::to_string(count));
}

CommOptions options_from(const strataConfig_t* config) {
  CommOptions opts;
  if (config == nullptr) return opts;
  // A larger size comes from a newer header: its extra fields are not ours to read.
  constexpr std::size_t v1_size = offsetof(strataConfig_t, timeout_ms) + sizeof(int);
  if (config->size < v1_size)
    invalid("config->size is " + std::to_string(config->size) +
            "; initialize the config with STRATA_CONFIG_INITIALIZER");
  switch (config->transport) {
    case strataTransportAuto: opts.transport = TransportKind::automatic; break;
    case strataTransportUcx: opts.transport = TransportKind::ucx; break;
    case strataTransportTcp: opts.transport = TransportKind::tcp; break;
    default:
      invalid("config->transport " + std::to_string(config->transport) +
              " is not strataTransportAuto, strataTransportUcx or strataTransportTcp");
  }
  if (config->timeout_ms < 0)
    invalid("config->timeout_ms is " + std::to_string(config->timeout_ms) +
            "; use 0 for the default");
  opts.timeout = std::chrono::milliseconds(config->timeout_ms);
  return opts;
}

}  // namespace strata::capi

extern "C" {

const char* strataGetErrorString(strataResult_t result) noexcept {
  // Any int may arrive from C; the enum's underlying type is int, so this is well defined.
  switch (static_cast<int>(result)) {
    case strataSuccess: return "success";
    case strataInvalidArgument: return "invalid argument";
    case strataMismatch: return "collective mismatch: ranks issued different operations";
    case strataTimeout: return "timeout: a peer did not answer before the deadline";
    case strataAborted: return "aborted: the communicator was aborted or an operation failed";
    case strataTransportError: return "transport error";
    case strataInternalError: return "internal error";
    case strataInProgress: return "operation in progress";
    case strataPeerLost: return "peer lost: a rank died or stopped answering";
    case strataQuorumLost: return "quorum lost: too few ranks left to go on without risking two halves of a partition";
    default: return "unknown strata result code";
  }
}

}  // extern "C"
