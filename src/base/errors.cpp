#include "strata/errors.hpp"

#include "strata/options.hpp"

namespace strata {

const char* to_string(ErrorCode c) {
  switch (c) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::mismatch: return "collective mismatch";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::aborted: return "aborted";
    case ErrorCode::transport: return "transport error";
    case ErrorCode::internal: return "internal error";
    case ErrorCode::peer_lost: return "peer lost";
    case ErrorCode::quorum_lost: return "quorum lost";
  }
  return "unknown error";
}

const char* to_string(TransportKind k) {
  switch (k) {
    case TransportKind::automatic: return "auto";
    case TransportKind::ucx: return "ucx";
    case TransportKind::tcp: return "tcp";
  }
  return "?";
}

}  // namespace strata
