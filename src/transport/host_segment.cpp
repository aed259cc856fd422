#include "transport/host_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>
#include <utility>

#include "strata/errors.hpp"

namespace strata::transport {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name, int err) {
  throw TransportError("shared segment " + name + ": " + what + " failed: " + std::strerror(err));
}

char* map(int fd, const std::string& name, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) fail("mmap", name, err);
  return static_cast<char*>(p);
}

}  // namespace

HostSegment HostSegment::create(std::size_t bytes) {
  std::random_device rd;
  std::ostringstream name;
  name << "/strata-" << std::hex << rd() << rd();
  const std::string n = name.str();
  const int fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail("shm_open", n, errno);
  // posix_fallocate, unlike ftruncate alone, fails now if /dev/shm is too small,
  // instead of a SIGBUS at the first touch of a page it could not back.
  int err = ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno : ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    ::shm_unlink(n.c_str());
    fail("reserving " + std::to_string(bytes) + " bytes", n, err);
  }
  try {
    return HostSegment(n, map(fd, n, bytes), bytes);
  } catch (...) {
    ::shm_unlink(n.c_str());
    throw;
  }
}

HostSegment HostSegment::open(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw TransportError("shared segment " + name + " does not hold the " + std::to_string(bytes) + " bytes expected");
  }
  return HostSegment(name, map(fd, name, bytes), bytes);
}

void HostSegment::unlink(const std::string& name) { ::shm_unlink(name.c_str()); }

HostSegment::HostSegment(HostSegment&& o) noexcept
    : name_(std::move(o.name_)), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

HostSegment& HostSegment::operator=(HostSegment&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, bytes_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

HostSegment::~HostSegment() {
  if (data_) ::munmap(data_, bytes_);
}

}  // namespace strata::transport
