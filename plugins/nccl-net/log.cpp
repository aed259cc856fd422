#include "log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace strata::nccl_net::log {

namespace {

std::atomic<abi::Logger> g_logger{nullptr};

void emit(int level, const char* fmt, va_list args) noexcept {
  // Formatted here, handed to NCCL as "%s": the logger's own varargs cannot be forwarded.
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, args);
  if (const abi::Logger logger = g_logger.load(std::memory_order_acquire)) {
    logger(level, abi::kSubsysNet, __FILE__, __LINE__, "NET/strata: %s", line);
  } else if (level == abi::log_warn) {
    std::fprintf(stderr, "NET/strata: %s\n", line);
  }
}

}  // namespace

void set_logger(abi::Logger logger) noexcept {
  if (logger) g_logger.store(logger, std::memory_order_release);
}

void warn(const char* fmt, ...) noexcept {
  va_list args;
  va_start(args, fmt);
  emit(abi::log_warn, fmt, args);
  va_end(args);
}

void info(const char* fmt, ...) noexcept {
  va_list args;
  va_start(args, fmt);
  emit(abi::log_info, fmt, args);
  va_end(args);
}

}  // namespace strata::nccl_net::log
