#include "probe/figures_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "base/log.hpp"

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

// Each kind of trouble is told once per process: every communicator consults the cache.
void warn_once(std::atomic<bool>& told, const std::string& text) {
  if (!told.exchange(true)) log::warn("probe cache: " + text);
}
std::atomic<bool> told_dir{false}, told_file{false};

std::string octal(mode_t m) {
  char s[8];
  std::snprintf(s, sizeof s, "%04o", static_cast<unsigned>(m & 07777));
  return s;
}

// The cache's directory, when it is this user's own and private: a directory anyone else
// can write (a /tmp name another user took first, say) could feed every job figures of
// their choosing, or read this user's. `create`: make it first if it is missing.
bool private_dir(const std::string& dir, bool create) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (!create) return false;
    // $XDG_CACHE_HOME need not exist yet (the XDG rule: create it); only strata's own
    // directory is kept private.
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ignored);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
    if (::lstat(dir.c_str(), &st) != 0) return false;
  }
  std::string trouble;
  if (!S_ISDIR(st.st_mode))
    trouble = "is not a directory";
  else if (st.st_uid != ::getuid())
    trouble = "belongs to uid " + std::to_string(st.st_uid) + ", not this user's " + std::to_string(::getuid());
  else if ((st.st_mode & 077) != 0)
    trouble = "has mode " + octal(st.st_mode) + ", which lets other users in";
  if (trouble.empty()) return true;
  warn_once(told_dir, dir + " " + trouble + ": not used (links are probed at every creation); remove it, "
                                            "or point XDG_CACHE_HOME elsewhere");
  return false;
}

}  // namespace

std::string cache_path(const std::string& key) {
  char name[40];
  std::snprintf(name, sizeof name, "/probe-%016llx.txt", static_cast<unsigned long long>(fnv1a(key)));
  return cache_dir() + name;
}

std::optional<topology::Measured> read_cache(const std::string& path, const std::string& key, double max_age_s) {
  if (!private_dir(std::filesystem::path(path).parent_path(), false)) return std::nullopt;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string s;
  std::string trouble;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    trouble = "is not a regular file";
  } else if (st.st_size > static_cast<off_t>(kMaxCacheFile)) {
    trouble = "holds " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(kMaxCacheFile) +
              " a cache of figures takes";
  } else if (std::difftime(std::time(nullptr), st.st_mtime) <= max_age_s) {
    s.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < s.size()) {
      const ssize_t n = ::read(fd, s.data() + got, s.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    s.resize(got);
  }
  ::close(fd);
  if (!trouble.empty()) {
    warn_once(told_file, path + " " + trouble + ": ignored (the links are probed instead)");
    return std::nullopt;
  }
  // The whole key sits in the file, so a hash collision reads as a miss.
  const std::string head = std::string(kCacheMagic) + "\n" + key + "\n";
  if (s.compare(0, head.size(), head) != 0) return std::nullopt;
  auto m = topology::parse_measured(s.substr(head.size()));
  if (!m) warn_once(told_file, path + " does not parse: ignored (the links are probed instead)");
  return m;
}

void write_cache(const std::string& path, const std::string& key, const topology::Measured& m) {
  if (!private_dir(std::filesystem::path(path).parent_path(), true)) return;
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
