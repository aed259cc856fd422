// The one registry of strata's settings: every knob has a name, an environment variable,
// a type, a default and a line of help. Values are read from the environment once, on
// first use; STRATA_DEBUG=INFO prints them all at communicator creation.
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
  const char* help;
};

const std::vector<Setting>& registry();

// Typed reads; throw InvalidArgument naming the variable when its value does not parse.
std::int64_t get_int(const char* name);
double get_real(const char* name);
std::string get_string(const char* name);

// "STRATA_TIMEOUT_S=300 (default) ..." one per line, for logs and --help.
std::string dump();

}  // namespace strata::config
