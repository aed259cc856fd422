// Minimal leveled logging to stderr, prefixed with the rank. The level is the process's,
// WARN until whoever reads the settings (core/, at a communicator's creation; a tool or
// the server at start) sets it from STRATA_DEBUG.
#pragma once

#include <string>

namespace strata::log {

enum class Level { error = 0, warn = 1, info = 2, trace = 3 };

bool enabled(Level l);
void set_level(Level l);
// "ERROR", "WARN", "INFO" or "TRACE" in any case; anything else is WARN.
Level level_named(const std::string& name);
void set_rank(int rank);
void write(Level l, const std::string& msg);

inline void error(const std::string& m) { if (enabled(Level::error)) write(Level::error, m); }
inline void info(const std::string& m) { if (enabled(Level::info)) write(Level::info, m); }
inline void warn(const std::string& m) { if (enabled(Level::warn)) write(Level::warn, m); }
inline void trace(const std::string& m) { if (enabled(Level::trace)) write(Level::trace, m); }

}  // namespace strata::log
