// The one registry of strata's settings (settings.def): every knob has a key, an
// environment variable, a type, a default, the values it accepts and a line of help.
// Values are read from the environment when asked for; STRATA_DEBUG=INFO prints them
// all at communicator creation. It lives in core/ so that no layer below can read a
// setting: core resolves them once per communicator and hands the values down.
//
// Reads go through typed keys, so a misspelt setting does not compile and a setting is
// always read as its type: config::get(config::chunk_bytes) is an std::int64_t within
// the registry's range, or an InvalidArgument naming the variable and what it accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::config {

enum class Type { integer, real, string };

struct Setting {
  const char* name;
  const char* env;
  Type type;
  const char* default_value;
  double lo, hi;        // integer and real: the accepted range, inclusive
  const char* choices;  // string: the accepted words, space-separated; nullptr: any text
  const char* help;
};

// In settings.def's order.
const std::vector<Setting>& registry();

enum class Id : std::uint16_t {
#define STRATA_SETTING(key, env, type, def, lo, hi, choices, help) key,
#include "core/settings.def"
#undef STRATA_SETTING
};

template <Type T>
struct Key {
  Id id;
};

#define STRATA_SETTING(key, env, type, def, lo, hi, choices, help) inline constexpr Key<Type::type> key{Id::key};
#include "core/settings.def"
#undef STRATA_SETTING

std::int64_t get(Key<Type::integer> k);
double get(Key<Type::real> k);
std::string get(Key<Type::string> k);

// Whether the environment sets it (to something not empty), for settings whose default
// depends on more than the registry knows.
template <Type T>
bool given(Key<T> k);
// The value as written (or the default), unparsed: for cache keys and logs.
template <Type T>
std::string text(Key<T> k);

// "STRATA_TIMEOUT_S=300 (default) ..." one per line, for logs and --help.
std::string dump();

// One line for each STRATA_* variable in `environment` (NAME=VALUE entries) that no part
// of strata reads: a renamed setting names its new name, a near miss the setting it
// resembles. Such a variable is otherwise ignored without a word.
std::vector<std::string> unknown_variables(const std::vector<std::string>& environment);
// unknown_variables() of this process's environment.
std::vector<std::string> unknown_variables();

}  // namespace strata::config
