// Driving a connected pair the way NCCL's proxy does: connection setup by repeated
// listen/connect/accept calls with handles exchanged out of band, then many concurrent
// isends and (grouped) irecvs retried when the plugin returns a null request, tested
// until done, with every byte checked against a pattern both sides derive from a seed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pair.hpp"
#include "plugin_api.hpp"

namespace strata::plugin_test {

struct Conn {
  void* ctx = nullptr;  // v11 only
  void* listen = nullptr;
  void* send = nullptr;  // to the other process
  void* recv = nullptr;  // from the other process
};

// init, listen on `dev`, swap handles over `ch`, then connect and accept (interleaved,
// as NCCL's service thread does) until both comms exist. Throws on error or timeout.
Conn connect_pair(NetApi& net, Channel& ch, int dev, std::chrono::seconds timeout);
// Closes in the given order: a permutation of "lsr" (listen, send, recv).
void close_conn(NetApi& net, Conn& c, const char* order = "lsr");

struct Msg {
  std::size_t size = 0, capacity = 0;
  int tag = 0;
};
struct Group {  // one irecv: msgs[first, first+n), sent in send_order
  int first = 0, n = 1;
  std::vector<int> send_order;
};
struct Plan {
  std::vector<Msg> msgs;
  std::vector<Group> groups;
  std::size_t bytes() const;
};

struct PlanOptions {
  int messages = 200;
  int max_group = 8;          // receives group 1..max_group messages
  double large_share = 0.06;  // share of messages between 4 MiB and 9 MiB
  std::size_t max_small = 64 << 10;
};
Plan make_plan(std::uint64_t seed, const PlanOptions& opt);

struct DriveOptions {
  std::size_t sends_in_flight = 64;
  std::size_t recvs_in_flight = 32;
  bool register_memory = true;
  bool verify = true;
  std::chrono::seconds timeout{60};
  const std::atomic<bool>* stop = nullptr;  // set by the other direction when it failed
};

// Sends (receives) the whole plan on one comm; throws describing the first mismatch,
// error code or timeout. Returns how many times the plugin answered "retry later".
std::size_t drive_sends(NetApi& net, void* comm, const Plan& plan, std::uint64_t seed, const DriveOptions& opt);
std::size_t drive_recvs(NetApi& net, void* comm, const Plan& plan, std::uint64_t seed, const DriveOptions& opt);

// Both directions at once from two threads, as NCCL's progress thread would interleave
// two comms (but truly concurrent, which is stricter).
void exchange(NetApi& net, Conn& c, int role, const PlanOptions& popt, const DriveOptions& dopt,
              std::uint64_t seed);

void fill_pattern(char* buf, std::size_t n, std::uint64_t seed, std::uint64_t msg);
// Offset of the first byte that differs from the pattern, or n when all match.
std::size_t check_pattern(const char* buf, std::size_t n, std::uint64_t seed, std::uint64_t msg);

}  // namespace strata::plugin_test
