// Two processes the way NCCL runs two ranks: forked children, each with its own
// environment (region, interface, WAN settings) and optionally its own network
// namespace, joined by a socketpair that plays NCCL's bootstrap (handles go over it).
// Both children run under alarm(); the parent kills whichever is still running at the
// deadline, so no test can hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace strata::plugin_test {

// The out-of-band channel between the two children; every call has a deadline.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  void send(const void* data, std::size_t n);
  void recv(void* data, std::size_t n);
  // A barrier: both sides call it; returns when the other has too.
  void sync();

 private:
  int fd_;
};

struct PeerSetup {
  std::vector<std::pair<std::string, std::string>> env;  // set (empty: unset) before loading
  std::string netns;  // /var/run/netns/<name> entered first, when not empty
};

// Runs body(role, channel) in two children (role 0 and 1). True when both exit 0 before
// `timeout`; failures are printed with the role.
bool run_pair(const std::function<int(int role, Channel& ch)>& body, const PeerSetup& setup0,
              const PeerSetup& setup1, std::chrono::seconds timeout);

// Runs body() in one child, so a crash is a failed test instead of a dead harness.
bool run_isolated(const std::function<int()>& body, const PeerSetup& setup, std::chrono::seconds timeout);

}  // namespace strata::plugin_test
