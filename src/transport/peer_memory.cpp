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

// How many bytes one process_vm_readv moves at most before we loop: the kernel pins the
// source pages of one call at a time in batches anyway, and a bound keeps a single call
// from holding the engine for long.
constexpr std::size_t kMaxRead = std::size_t{64} << 20;

struct Record {
  pid_t pid = 0;
  std::uint64_t addr = 0, token = 0;
  std::string segment;  // the host's shared segment, from its lowest rank; "-" if none
};

bool parse(const std::string& s, Record& r) {
  std::istringstream in(s);
  long long pid = 0;
  in >> pid >> std::hex >> r.addr >> r.token >> r.segment;
  r.pid = static_cast<pid_t>(pid);
  return !in.fail() && pid > 0;
}

// 0 with *got set to the bytes read, or the error number.
int try_read(pid_t pid, std::uint64_t addr, void* dst, std::size_t bytes, std::size_t* got) {
  iovec local{dst, bytes};
  iovec remote{reinterpret_cast<void*>(addr), bytes};
  const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return errno;
  *got = static_cast<std::size_t>(n);
  return 0;
}

}  // namespace

PeerMemory::PeerMemory(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
                       const std::string& prefix, bootstrap::Clock::time_point deadline)
    : pids_(same_host.size(), 0), slots_(same_host.size(), -1) {
  std::vector<int> host;  // this host's ranks, in rank order: slot i belongs to host[i]
  for (int p = 0; p < static_cast<int>(same_host.size()); ++p)
    if (p == rank || same_host[static_cast<std::size_t>(p)]) host.push_back(p);
  if (host.size() < 2) return;
  const bool leader = host.front() == rank;
  std::random_device rd;
  token_ = (static_cast<std::uint64_t>(rd()) << 32 | rd()) | 1;  // never 0
  if (enabled && leader) {
    try {
      segment_.emplace(HostSegment::create(host.size() * kSlotBytes));
    } catch (const TransportError&) {
      enabled = false;  // published as a refusal below
    }
  }
  std::ostringstream mine;
  mine << ::getpid() << ' ' << std::hex << reinterpret_cast<std::uintptr_t>(&token_) << ' ' << token_ << ' '
       << (segment_ ? segment_->name() : "-");
  store.set(prefix + "who/" + std::to_string(rank), mine.str());

  std::vector<int> peers;
  std::vector<std::string> keys;
  for (const int p : host)
    if (p != rank) {
      peers.push_back(p);
      keys.push_back(prefix + "who/" + std::to_string(p));
    }
  const auto records = store.get(keys, deadline);
  std::vector<Record> who(peers.size());
  bool ok = enabled;
  for (std::size_t i = 0; ok && i < peers.size(); ++i) {
    std::uint64_t seen = 0;
    std::size_t got = 0;
    ok = parse(records[i], who[i]) && try_read(who[i].pid, who[i].addr, &seen, sizeof seen, &got) == 0 &&
         got == sizeof seen && seen == who[i].token;
  }
  if (ok && !leader) {
    try {
      segment_.emplace(HostSegment::open(who.front().segment, host.size() * kSlotBytes));
    } catch (const TransportError&) {
      ok = false;
    }
  }
  store.set(prefix + "ok/" + std::to_string(rank), ok ? "1" : "0");
  for (auto& k : keys) k.replace(prefix.size(), 4, "ok/");
  const auto verdicts = store.get(keys, deadline);
  // Every rank has opened the segment or given up by now: the name may go.
  if (leader && segment_) HostSegment::unlink(segment_->name());
  for (const auto& v : verdicts) ok = ok && v == "1";
  if (!ok) {
    segment_.reset();
    return;
  }
  for (std::size_t i = 0; i < peers.size(); ++i) pids_[static_cast<std::size_t>(peers[i])] = who[i].pid;
  for (std::size_t i = 0; i < host.size(); ++i) slots_[static_cast<std::size_t>(host[i])] = static_cast<int>(i);
}

char* PeerMemory::slot(int r) const {
  const int i = slots_[static_cast<std::size_t>(r)];
  if (i < 0 || !segment_) throw TransportError("rank " + std::to_string(r) + " has no slot in this host's segment");
  return segment_->data() + static_cast<std::size_t>(i) * kSlotBytes;
}

void PeerMemory::read(int peer, std::uint64_t addr, void* dst, std::size_t bytes) const {
  const pid_t pid = pids_[static_cast<std::size_t>(peer)];
  if (pid <= 0) throw TransportError("rank " + std::to_string(peer) + " does not share this host's memory");
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    std::size_t got = 0;
    const std::size_t want = std::min(bytes, kMaxRead);
    if (const int err = try_read(pid, addr, out, want, &got); err != 0 || got == 0)
      throw TransportError("reading " + std::to_string(want) + " bytes of rank " + std::to_string(peer) +
                           "'s memory (process " + std::to_string(pid) + ") failed: " +
                           (err ? std::strerror(err) : "nothing read") +
                           (err == ESRCH ? " (the process is gone)" : ""));
    out += got;
    addr += got;
    bytes -= got;
  }
}

void Transport::read_peer(int peer, std::uint64_t, void*, std::size_t) { refuse_peer_memory(peer); }

char* Transport::shared_slot(int r) { refuse_peer_memory(r); }

void Transport::refuse_peer_memory(int peer) const {
  throw TransportError(std::string(name()) + ": rank " + std::to_string(peer) +
                       " does not share memory with rank " + std::to_string(rank()));
}

}  // namespace strata::transport
