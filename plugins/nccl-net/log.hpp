// Logging through the function NCCL hands to init, so plugin lines appear in NCCL's own
// log (NCCL_DEBUG=INFO, subsystem NET). Before init, or when a host passes none,
// warnings go to stderr and the rest is dropped.
#pragma once

#include "nccl_abi.hpp"

namespace strata::nccl_net::log {

void set_logger(abi::Logger logger) noexcept;

// printf-style; never throws.
void warn(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
void info(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

}  // namespace strata::nccl_net::log
