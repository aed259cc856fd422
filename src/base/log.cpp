#include "base/log.hpp"

#include <atomic>
#include <cstdio>
#include <strings.h>


namespace strata::log {

namespace {

std::atomic<int> g_rank{-1};
std::atomic<int> g_level{static_cast<int>(Level::warn)};

}  // namespace

Level level_named(const std::string& v) {
  if (strcasecmp(v.c_str(), "ERROR") == 0) return Level::error;
  if (strcasecmp(v.c_str(), "INFO") == 0) return Level::info;
  if (strcasecmp(v.c_str(), "TRACE") == 0) return Level::trace;
  return Level::warn;
}

bool enabled(Level l) { return static_cast<int>(l) <= g_level.load(std::memory_order_relaxed); }

void set_level(Level l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }

void set_rank(int rank) { g_rank = rank; }

void write(Level l, const std::string& msg) {
  static const char* names[] = {"ERROR", "WARN", "INFO", "TRACE"};
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "[strata rank %d] %s %s\n", g_rank.load(), names[static_cast<int>(l)],
               msg.c_str());
}

}  // namespace strata::log
