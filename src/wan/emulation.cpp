#include "wan/emulation.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "strata/errors.hpp"

namespace strata::wan {

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& value, const std::string& why) {
  throw InvalidArgument("STRATA_WAN_EMULATE: bad " + field + " '" + value + "': " + why);
}

// The number at the front of v, and the unit after it.
double number(const std::string& field, const std::string& v, std::string* unit) {
  const char* begin = v.c_str();
  char* end = nullptr;
  const double x = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(x) || x < 0) bad(field, v, "expected a non-negative number");
  *unit = std::string(end);
  return x;
}

double rate(const std::string& v) {
  std::string unit;
  const double x = number("rate", v, &unit);
  double bits = 0;
  if (unit == "bit") bits = x;
  else if (unit == "kbit") bits = x * 1e3;
  else if (unit == "mbit") bits = x * 1e6;
  else if (unit == "gbit") bits = x * 1e9;
  else bad("rate", v, "unit must be bit, kbit, mbit or gbit");
  if (bits <= 0) bad("rate", v, "must be positive");
  if (bits > 1e15) bad("rate", v, "must be at most 1000000gbit");
  return bits / 8;
}

std::chrono::nanoseconds delay(const std::string& v) {
  std::string unit;
  const double x = number("delay", v, &unit);
  double ns = 0;
  if (unit == "us") ns = x * 1e3;
  else if (unit == "ms") ns = x * 1e6;
  else if (unit == "s") ns = x * 1e9;
  else bad("delay", v, "unit must be us, ms or s");
  // Converted to integer nanoseconds: beyond an hour is no WAN, and far beyond it no int64.
  if (ns > 3600e9) bad("delay", v, "must be at most 3600s");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

std::size_t window(const std::string& v) {
  std::string unit;
  const double x = number("window", v, &unit);
  double mult = 1;
  if (unit == "k") mult = 1024;
  else if (unit == "m") mult = 1024.0 * 1024;
  else if (unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) bad("window", v, "suffix must be k, m or g");
  if (x * mult < 1) bad("window", v, "must be at least one byte");
  if (x * mult > 0x1p40) bad("window", v, "must be at most 1024g");
  return static_cast<std::size_t>(x * mult);
}

}  // namespace

Emulation parse_emulation(const std::string& spec) {
  Emulation e;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InvalidArgument("STRATA_WAN_EMULATE: '" + item + "' is not field=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "rate") {
      e.rate_bytes_per_s = rate(value);
    } else if (key == "delay") {
      e.delay = delay(value);
    } else if (key == "window") {
      e.window = window(value);
    } else if (key == "loss") {
      std::string rest;
      e.loss = number("loss", value, &rest);
      if (!rest.empty() || e.loss > 1) bad("loss", value, "expected a probability in [0, 1]");
    } else if (key == "corrupt") {
      std::string rest;
      e.corrupt = number("corrupt", value, &rest);
      if (!rest.empty() || e.corrupt > 1) bad("corrupt", value, "expected a probability in [0, 1]");
    } else if (key == "cut") {
      std::string rest;
      const double n = number("cut", value, &rest);
      if (!rest.empty() || n != std::floor(n) || n > 0x1p53) bad("cut", value, "expected a frame count");
      e.cut_after = static_cast<std::uint64_t>(n);
    } else {
      throw InvalidArgument("STRATA_WAN_EMULATE: unknown field '" + key +
                            "' (known: rate, delay, window, loss, corrupt, cut)");
    }
  }
  return e;
}

bool TokenBucket::take(double n, Clock::time_point now, Clock::time_point* ready_at) {
  if (!limited()) return true;
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
  if (tokens_ >= n || tokens_ >= burst_) {
    tokens_ -= n;  // may go negative for an oversized frame: the debt delays the next one
    return true;
  }
  const double wait_s = (std::min(n, burst_) - tokens_) / rate_;
  *ready_at = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  return false;
}

}  // namespace strata::wan
