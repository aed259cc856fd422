// What the harness's cases share: failures that name their line, each peer's environment,
// and a pair that connects, exchanges verified traffic both ways and closes.
#pragma once

#include <chrono>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cases.hpp"
#include "pair.hpp"
#include "traffic.hpp"

namespace strata::plugin_test {

inline constexpr auto kTimeout = std::chrono::seconds(90);
// ncclResult_t values the cases expect.
inline constexpr int kSystemError = 2, kInvalidUsage = 5, kRemoteError = 6;

using Env = std::vector<std::pair<std::string, std::string>>;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define EXPECT(cond)                                                                                \
  do {                                                                                              \
    if (!(cond)) throw Failure(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + #cond); \
  } while (0)

// The case's interface and extra environment, the region, then `more`.
PeerSetup setup(const CaseArgs& a, const std::string& region = "", Env more = {});
// Throws Failure naming `what` unless rc is 0.
void ok(int rc, const char* what);
// Two processes, full traffic both ways over device 0, then a clean close in opposite
// orders; each must have logged every line of `expect_logs`.
bool traffic_case(const CaseArgs& a, const PeerSetup& s0, const PeerSetup& s1, const PlanOptions& popt,
                  std::initializer_list<const char*> expect_logs);
// Two peers in different regions (the striped path), both given the WAN settings `wan`.
bool crossregion_case(const CaseArgs& a, const Env& wan, int messages, double large_share,
                      std::initializer_list<const char*> expect_logs);

}  // namespace strata::plugin_test
