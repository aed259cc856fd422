#include "base/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "strata/errors.hpp"

namespace strata::config {

const std::vector<Setting>& registry() {
  static const std::vector<Setting> settings = {
#define STRATA_SETTING(key, env, type, def, lo, hi, choices, help) \
  {#key, env, Type::type, def, static_cast<double>(lo), static_cast<double>(hi), choices, help},
#include "base/settings.def"
#undef STRATA_SETTING
  };
  return settings;
}

namespace {

const Setting& setting(Id id) { return registry()[static_cast<std::size_t>(id)]; }

// The environment's value, or nullptr where it is unset or empty (both mean the default).
const char* env_value(const Setting& s) {
  const char* v = std::getenv(s.env);
  return v && *v ? v : nullptr;
}

std::string raw(const Setting& s) {
  const char* v = env_value(s);
  return v ? std::string(v) : std::string(s.default_value);
}

// "[4096, 1073741824]", for errors.
std::string range(const Setting& s) {
  std::ostringstream o;
  o.precision(15);
  o << "[" << s.lo << ", " << s.hi << "]";
  return o.str();
}

}  // namespace

std::int64_t get(Key<Type::integer> k) {
  const Setting& s = setting(k.id);
  const std::string v = raw(s);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || errno == ERANGE)
    throw InvalidArgument(std::string(s.env) + "='" + v + "' is not an integer");
  if (static_cast<double>(x) < s.lo || static_cast<double>(x) > s.hi)
    throw InvalidArgument(std::string(s.env) + "=" + v + " is outside " + range(s));
  return x;
}

double get(Key<Type::real> k) {
  const Setting& s = setting(k.id);
  const std::string v = raw(s);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(x))
    throw InvalidArgument(std::string(s.env) + "='" + v + "' is not a number");
  if (x < s.lo || x > s.hi) throw InvalidArgument(std::string(s.env) + "=" + v + " is outside " + range(s));
  return x;
}

std::string get(Key<Type::string> k) {
  const Setting& s = setting(k.id);
  std::string v = raw(s);
  if (!s.choices) return v;
  std::istringstream words(s.choices);
  std::string listed;
  for (std::string w; words >> w;) {
    if (w == v) return v;
    listed += (listed.empty() ? "" : ", ") + w;
  }
  throw InvalidArgument(std::string(s.env) + "='" + v + "' is not one of " + listed);
}

template <Type T>
std::string text(Key<T> k) {
  return raw(setting(k.id));
}
template <Type T>
bool given(Key<T> k) {
  return env_value(setting(k.id)) != nullptr;
}
template bool given(Key<Type::integer>);
template bool given(Key<Type::real>);
template bool given(Key<Type::string>);

template std::string text(Key<Type::integer>);
template std::string text(Key<Type::real>);
template std::string text(Key<Type::string>);

std::string dump() {
  std::string out;
  for (const auto& s : registry()) {
    const char* v = env_value(s);
    const bool secret = std::string_view(s.name) == "job_secret";  // never in a log
    out += std::string(s.env) + "=" + (secret && v ? std::string("(set)") : raw(s)) + (v ? "" : " (default)") + "\n";
  }
  return out;
}

}  // namespace strata::config
