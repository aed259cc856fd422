#include "transport/peer_memory.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

#include "strata/errors.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

namespace {

// How many bytes one process_vm_readv/writev moves at most before we loop: the kernel pins the
// source pages of one call at a time in batches anyway, and a bound keeps a single call
// from holding the engine for long.
constexpr std::size_t kMaxRead = std::size_t{64} << 20;

struct Record {
  pid_t pid = 0;
  std::uint64_t addr = 0, token = 0;
};

bool parse(const std::string& s, Record& r) {
  std::istringstream in(s);
  long long pid = 0;
  in >> pid >> std::hex >> r.addr >> r.token;
  r.pid = static_cast<pid_t>(pid);
  return !in.fail() && pid > 0;
}

// 0 with *got set to the bytes moved, or the error number.
int try_copy(pid_t pid, std::uint64_t addr, void* mine, std::size_t bytes, bool to_peer, std::size_t* got) {
  iovec local{mine, bytes};
  iovec remote{reinterpret_cast<void*>(addr), bytes};
  const ssize_t n = to_peer ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                            : ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return errno;
  *got = static_cast<std::size_t>(n);
  return 0;
}

}  // namespace

PeerMemory::PeerMemory(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
                       const std::string& prefix, bootstrap::Clock::time_point deadline)
    : pids_(same_host.size(), 0) {
  std::random_device rd;
  token_ = (static_cast<std::uint64_t>(rd()) << 32 | rd()) | 1;  // never 0
  std::ostringstream mine;
  mine << ::getpid() << ' ' << std::hex << reinterpret_cast<std::uintptr_t>(&token_) << ' ' << token_;
  store.set(prefix + "who/" + std::to_string(rank), mine.str());

  std::vector<int> peers;
  std::vector<std::string> keys;
  for (int p = 0; p < static_cast<int>(same_host.size()); ++p)
    if (p != rank && same_host[static_cast<std::size_t>(p)]) {
      peers.push_back(p);
      keys.push_back(prefix + "who/" + std::to_string(p));
    }
  if (peers.empty()) return;
  const auto records = store.get(keys, deadline);
  std::vector<Record> who(peers.size());
  bool ok = enabled;
  for (std::size_t i = 0; ok && i < peers.size(); ++i) {
    std::uint64_t seen = 0;
    std::size_t got = 0;
    // Writing back the value just read leaves the token as it was, whoever writes first.
    ok = parse(records[i], who[i]) && try_copy(who[i].pid, who[i].addr, &seen, sizeof seen, false, &got) == 0 &&
         got == sizeof seen && seen == who[i].token &&
         try_copy(who[i].pid, who[i].addr, &seen, sizeof seen, true, &got) == 0 && got == sizeof seen;
  }
  store.set(prefix + "ok/" + std::to_string(rank), ok ? "1" : "0");
  for (auto& k : keys) k.replace(prefix.size(), 4, "ok/");
  for (const auto& v : store.get(keys, deadline)) ok = ok && v == "1";
  if (!ok) return;
  for (std::size_t i = 0; i < peers.size(); ++i) pids_[static_cast<std::size_t>(peers[i])] = who[i].pid;
}

void PeerMemory::read(int peer, std::uint64_t addr, void* dst, std::size_t bytes) const {
  copy(peer, addr, dst, bytes, false);
}

void PeerMemory::write(int peer, std::uint64_t addr, const void* src, std::size_t bytes) const {
  // process_vm_writev only reads the local iovec.
  copy(peer, addr, const_cast<void*>(src), bytes, true);
}

void PeerMemory::copy(int peer, std::uint64_t addr, void* mine, std::size_t bytes, bool to_peer) const {
  const pid_t pid = pids_[static_cast<std::size_t>(peer)];
  if (pid <= 0) throw TransportError("rank " + std::to_string(peer) + " does not share this host's memory");
  auto* at = static_cast<char*>(mine);
  while (bytes > 0) {
    std::size_t got = 0;
    const std::size_t want = std::min(bytes, kMaxRead);
    if (const int err = try_copy(pid, addr, at, want, to_peer, &got); err != 0 || got == 0)
      throw TransportError(std::string(to_peer ? "writing " : "reading ") + std::to_string(want) + " bytes of rank " +
                           std::to_string(peer) + "'s memory (process " + std::to_string(pid) + ") failed: " +
                           (err ? std::strerror(err) : "nothing moved") +
                           (err == ESRCH ? " (the process is gone)" : ""));
    at += got;
    addr += got;
    bytes -= got;
  }
}

void Transport::read_peer(int peer, std::uint64_t, void*, std::size_t) { refuse_peer_memory(peer); }

void Transport::write_peer(int peer, std::uint64_t, const void*, std::size_t) { refuse_peer_memory(peer); }

void Transport::refuse_peer_memory(int peer) const {
  throw TransportError(std::string(name()) + ": rank " + std::to_string(peer) +
                       " does not share memory with rank " + std::to_string(rank()));
}

}  // namespace strata::transport
