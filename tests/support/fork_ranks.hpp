// Multiprocess test harness: forks N real rank processes on this machine, bounds them in
// time, and collects what each printed. GoogleTest assertions do not cross fork(), so a
// child reports failure by throwing (or by a non-zero exit); the parent asserts.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace strata::test {

struct RankResult {
  int rank = 0;
  int exit_code = -1;      // -1 when killed by a signal or by the timeout
  bool timed_out = false;
  std::string output;      // everything the child wrote to stdout and stderr
};

// Runs body(rank) in n children. Each child exits 0 if body returns, 1 if it throws (the
// message is printed). Children still running after `timeout` are killed.
std::vector<RankResult> fork_ranks(int n, std::chrono::milliseconds timeout,
                                   const std::function<void(int rank)>& body);

// "127.0.0.1:<port>" of a port that was free a moment ago, below the ephemeral range.
std::string free_root_address();

// Empty when every rank exited 0; otherwise a report of each failed rank and its output.
std::string failures(const std::vector<RankResult>& results);

// In a child: throws std::runtime_error with `what` unless cond holds.
void require(bool cond, const std::string& what);

}  // namespace strata::test
