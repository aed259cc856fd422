#include "core/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <sstream>
#include <string_view>

#include <unistd.h>

#include "strata/errors.hpp"

namespace strata::config {

const std::vector<Setting>& registry() {
  static const std::vector<Setting> settings = {
#define STRATA_SETTING(key, env, type, def, lo, hi, choices, help) \
  {#key, env, Type::type, def, static_cast<double>(lo), static_cast<double>(hi), choices, help},
#include "core/settings.def"
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

namespace {

// STRATA_* variables that are not settings but are read by strata's launchers, tools,
// Python package and scripts (a prefix ends with '_').
constexpr std::string_view kNotSettings[] = {
    "STRATA_RANK", "STRATA_WORLD_SIZE", "STRATA_LOCAL_RANK", "STRATA_LOCAL_SIZE",  // launch environment
    "STRATA_ROOT", "STRATA_RUN_ID",
    "STRATA_PERF_SPAWNED", "STRATA_PLAN_SPAWNED", "STRATA_CONVERGENCE_SPAWNED",  // tools' own ranks
    "STRATA_NCCL_PERF_SPAWNED",
    "STRATA_TEST_STAGES", "STRATA_FUZZ_SECONDS", "STRATA_CHECK_PYTHON", "STRATA_TORCH_PYTHON",  // scripts
    "STRATA_BENCH_",
};

// Settings that were renamed, and their names now.
constexpr std::pair<std::string_view, std::string_view> kRenamed[] = {
    {"STRATA_SINGLE_COPY", "STRATA_SHARED_MEMORY"},
};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool known(std::string_view name) {
  for (const auto& s : registry())
    if (name == s.env) return true;
  for (auto n : kNotSettings)
    if (n.ends_with('_') ? name.starts_with(n) : name == n) return true;
  return false;
}

}  // namespace

std::vector<std::string> unknown_variables(const std::vector<std::string>& environment) {
  std::vector<std::string> out;
  for (const auto& entry : environment) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (!name.starts_with("STRATA_") || known(name)) continue;
    std::string line = std::string(name) + " is set but strata reads no such variable";
    const auto renamed = std::find_if(std::begin(kRenamed), std::end(kRenamed),
                                      [&](const auto& r) { return r.first == name; });
    if (renamed != std::end(kRenamed)) {
      line += ": it was renamed " + std::string(renamed->second);
    } else {
      // A near miss: the closest setting within a few edits (a dropped _S, a typo).
      const Setting* best = nullptr;
      std::size_t best_d = 4;
      for (const auto& s : registry())
        if (const auto d = edit_distance(name, s.env); d < best_d) best = &s, best_d = d;
      if (best) line += "; did you mean " + std::string(best->env) + "?";
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::vector<std::string> unknown_variables() {
  std::vector<std::string> env;
  for (char** e = ::environ; e && *e; ++e) env.emplace_back(*e);
  return unknown_variables(env);
}

}  // namespace strata::config
