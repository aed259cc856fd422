#include "probe/figures_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::probe {

namespace {

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/strata";
  return "/tmp/strata-cache-" + std::to_string(::getuid());
}

constexpr const char* kCacheMagic = "strata-probe 6";

}  // namespace

std::string cache_path(const std::string& key) {
  char name[40];
  std::snprintf(name, sizeof name, "/probe-%016llx.txt", static_cast<unsigned long long>(fnv1a(key)));
  return cache_dir() + name;
}

std::optional<topology::Measured> read_cache(const std::string& path, const std::string& key, double max_age_s) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (std::difftime(std::time(nullptr), st.st_mtime) > max_age_s) return std::nullopt;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  // The whole key sits in the file, so a hash collision reads as a miss.
  const std::string head = std::string(kCacheMagic) + "\n" + key + "\n";
  if (s.compare(0, head.size(), head) != 0) return std::nullopt;
  return topology::parse_measured(s.substr(head.size()));
}

void write_cache(const std::string& path, const std::string& key, const topology::Measured& m) {
  const std::string dir = cache_dir();
  // $XDG_CACHE_HOME need not exist yet (the XDG rule: create it); only strata's own
  // directory is kept private.
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ignored);
  ::mkdir(dir.c_str(), 0700);
  const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;  // a cache is an optimisation: no directory, no cache
    out << kCacheMagic << "\n" << key << "\n" << topology::serialize(m);
    if (!out) return;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace strata::probe
