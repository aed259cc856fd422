#include "bootstrap/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <thread>

#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Owns a file descriptor so every early exit (exceptions included) closes it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// nullopt when the file does not exist (yet).
std::optional<std::string> read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw TransportError("file store: cannot open " + path + ": " + errno_text());
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw TransportError("file store: cannot read " + path + ": " + errno_text());
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

void write_all(int fd, const std::string& data, const std::string& path) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw TransportError("file store: cannot write " + path + ": " + errno_text());
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string encode_key(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  // The empty key still needs a name, and one that cannot clash with temp or lock files.
  return out.empty() ? std::string("%") : out;
}

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InvalidArgument("file store: " + dir_ + " is not a directory");
}

std::string FileStore::path_of(const std::string& key) const {
  return dir_ + "/" + encode_key(key);
}

void FileStore::publish(const std::string& key, const std::string& value) {
  // Temp names start with '.', which encode_key never produces, and are unique per
  // process and call, so concurrent writers of one key never share a temp file.
  static std::atomic<unsigned> serial{0};
  const std::string final_path = path_of(key);
  const std::string tmp = dir_ + "/.tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(serial.fetch_add(1)) + "." + encode_key(key);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0)
      throw TransportError("file store: cannot create " + tmp + ": " + errno_text());
    try {
      write_all(fd.get(), value, tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw TransportError("file store: cannot publish " + final_path + ": " + why);
  }
}

void FileStore::set(const std::string& key, const std::string& value) { publish(key, value); }

std::vector<std::string> FileStore::get(const std::vector<std::string>& keys,
                                        Clock::time_point deadline) {
  std::vector<std::optional<std::string>> found(keys.size());
  // Start fast (peers usually publish within milliseconds of each other), then back off
  // so many waiting ranks do not hammer a shared file system.
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!found[i]) found[i] = read_file(path_of(keys[i]));
      all = all && found[i].has_value();
    }
    if (all) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (found[i]) continue;
        missing += (missing.empty() ? "" : ", ") + keys[i];
      }
      throw TimeoutError("file store " + dir_ + ": timed out waiting for keys: " + missing);
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (auto& v : found) out.push_back(std::move(*v));
  return out;
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  // The lock lives in its own file: the value file is replaced by rename on every update,
  // and a lock on a replaced inode would not exclude the next writer.
  const std::string lock_path = dir_ + "/.lock." + encode_key(key);
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0)
    throw TransportError("file store: cannot open " + lock_path + ": " + errno_text());
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR)
      throw TransportError("file store: cannot lock " + lock_path + ": " + errno_text());
  }
  std::int64_t value = 0;
  if (auto current = read_file(path_of(key)); current && !current->empty()) {
    const char* end = current->data() + current->size();
    auto [ptr, ec] = std::from_chars(current->data(), end, value);
    if (ec != std::errc() || ptr != end)
      throw InvalidArgument("file store: key '" + key + "' does not hold a counter");
  }
  value += delta;
  publish(key, std::to_string(value));
  // Closing the descriptor (Fd's destructor) releases the lock.
  return value;
}

}  // namespace strata::bootstrap
