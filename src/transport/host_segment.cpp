#include "transport/host_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "strata/errors.hpp"
#include "transport/transport.hpp"

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

// A fresh segment of `bytes` under `name`.
char* create(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name, errno);
  // posix_fallocate, unlike ftruncate alone, fails now if /dev/shm is too small,
  // instead of a SIGBUS at the first touch of a page it could not back.
  const int err = ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno
                                                                    : ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    fail("reserving " + std::to_string(bytes) + " bytes", name, err);
  }
  try {
    return map(fd, name, bytes);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
}

// The segment another rank created.
char* open(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fail("shm_open", name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw TransportError("shared segment " + name + " does not hold the " + std::to_string(bytes) + " bytes expected");
  }
  return map(fd, name, bytes);
}

}  // namespace

HostSegment::HostSegment(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
                         const std::string& prefix, bootstrap::Clock::time_point deadline)
    : rank_(rank), slots_(same_host.size(), -1) {
  try {
    agree(same_host, enabled, store, prefix, deadline);
  } catch (...) {
    release();  // a peer that never answered: the destructor will not run
    throw;
  }
}

void HostSegment::release() {
  if (!created_.empty()) ::shm_unlink(created_.c_str());
  created_.clear();
  if (data_) ::munmap(data_, bytes_);
  data_ = nullptr;
}

void HostSegment::agree(const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
                        const std::string& prefix, bootstrap::Clock::time_point deadline) {
  const int rank = rank_;
  std::vector<int> host;  // this host's ranks, in rank order: slot i belongs to host[i]
  for (int p = 0; p < static_cast<int>(same_host.size()); ++p)
    if (p == rank || same_host[static_cast<std::size_t>(p)]) host.push_back(p);
  if (host.size() < 2) return;
  const bool leader = host.front() == rank;
  const std::size_t bytes = host.size() * kSlotBytes;
  std::string name = "-";
  std::uint64_t token = 0;
  bool ok = enabled;
  if (ok && leader) {
    std::random_device rd;
    std::ostringstream n;
    n << "/strata-" << std::hex << rd() << rd();
    name = n.str();
    token = (static_cast<std::uint64_t>(rd()) << 32 | rd()) | 1;  // never 0
    try {
      data_ = create(name, bytes);
      bytes_ = bytes;
      created_ = name;
      std::memcpy(data_, &token, sizeof token);
    } catch (const TransportError&) {
      ok = false;
      name = "-";
    }
  }
  if (leader) {
    std::ostringstream who;
    who << name << ' ' << std::hex << token;
    store.set(prefix + "segment", who.str());
  } else if (ok) {
    std::istringstream who(store.get(std::vector<std::string>{prefix + "segment"}, deadline)[0]);
    who >> name >> std::hex >> token;
    std::uint64_t seen = 0;
    try {
      if (name != "-") {
        data_ = open(name, bytes);
        bytes_ = bytes;
        std::memcpy(&seen, data_, sizeof seen);
      }
    } catch (const TransportError&) {
    }
    ok = data_ != nullptr && seen == token;
  }
  store.set(prefix + "ok/" + std::to_string(rank), ok ? "1" : "0");
  std::vector<std::string> keys;
  for (const int p : host)
    if (p != rank) keys.push_back(prefix + "ok/" + std::to_string(p));
  const auto verdicts = store.get(keys, deadline);
  // Every rank has mapped the segment or given up by now: the name may go.
  if (!created_.empty()) ::shm_unlink(created_.c_str());
  created_.clear();
  for (const auto& v : verdicts) ok = ok && v == "1";
  if (!ok) return release();
  for (std::size_t i = 0; i < host.size(); ++i) slots_[static_cast<std::size_t>(host[i])] = static_cast<int>(i);
}

HostSegment::~HostSegment() { release(); }

char* HostSegment::slot(int r) const {
  const int i = slots_[static_cast<std::size_t>(r)];
  if (i < 0) throw TransportError("rank " + std::to_string(r) + " shares no memory with rank " + std::to_string(rank_));
  return data_ + static_cast<std::size_t>(i) * kSlotBytes;
}

void HostSegment::exclude(const std::vector<bool>& peers) {
  for (std::size_t p = 0; p < peers.size() && p < slots_.size(); ++p)
    if (peers[p] && static_cast<int>(p) != rank_) slots_[p] = -1;
}

bool Transport::shares_memory(int peer) const { return segment_ && segment_->shares(peer); }

char* Transport::shared_slot(int r) {
  if (segment_ && (r == rank() || segment_->shares(r))) return segment_->slot(r);
  throw TransportError(std::string(name()) + ": rank " + std::to_string(r) + " shares no memory with rank " +
                       std::to_string(rank()));
}

std::size_t Transport::shared_slot_bytes() const { return segment_ && segment_->active() ? HostSegment::kSlotBytes : 0; }

std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(host) + "/" + boot_id;
}

std::vector<bool> find_host_peers(bootstrap::Store& store, const std::string& prefix, int rank, int size,
                                  bootstrap::Clock::time_point deadline) {
  const std::string mine = host_identity();
  store.set(prefix + std::to_string(rank), mine);
  std::vector<std::string> keys;
  for (int p = 0; p < size; ++p) keys.push_back(prefix + std::to_string(p));
  const std::vector<std::string> theirs = store.get(keys, deadline);
  std::vector<bool> same(static_cast<std::size_t>(size));
  for (int p = 0; p < size; ++p) same[static_cast<std::size_t>(p)] = theirs[static_cast<std::size_t>(p)] == mine;
  return same;
}

}  // namespace strata::transport
