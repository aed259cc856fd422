// Steps, the resumable work every algorithm is written as (collectives/steps.hpp): lazy
// start, nesting, failures that reach whoever awaits, work started in flight and awaited
// later, frames destroyed with their owner. Driven by hand here through a gate that
// suspends; Context's driver does the same with requests (covered by every collective).
#include <gtest/gtest.h>

#include <coroutine>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/steps.hpp"

namespace strata::collectives {
namespace {

// What a piece of work suspends on, resumed by the test.
struct Gate {
  std::vector<std::coroutine_handle<>> waiting;
  auto operator co_await() {
    struct Awaiter {
      Gate& g;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { g.waiting.push_back(h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }
  void open_one() {
    auto h = waiting.front();
    waiting.erase(waiting.begin());
    h.resume();
  }
};

Steps record(std::vector<std::string>& log, Gate& gate, std::string name, int waits) {
  log.push_back(name + " begins");
  for (int i = 0; i < waits; ++i) co_await gate;
  log.push_back(name + " ends");
}

Steps fail_after(Gate& gate, int waits) {
  for (int i = 0; i < waits; ++i) co_await gate;
  throw std::runtime_error("step failed");
}

Steps outer(std::vector<std::string>& log, Gate& gate) {
  co_await record(log, gate, "inner", 2);
  log.push_back("outer resumes");
}

TEST(Steps, StartLazilyAndRunNestedWorkInOrder) {
  std::vector<std::string> log;
  Gate gate;
  Steps s = outer(log, gate);
  EXPECT_TRUE(log.empty());  // nothing runs before start
  EXPECT_FALSE(s.done());
  s.start();
  EXPECT_EQ(log, std::vector<std::string>{"inner begins"});
  gate.open_one();
  EXPECT_FALSE(s.done());
  gate.open_one();
  EXPECT_TRUE(s.done());
  EXPECT_EQ(log, (std::vector<std::string>{"inner begins", "inner ends", "outer resumes"}));
  EXPECT_NO_THROW(s.rethrow());
}

Steps await_failure(Gate& gate, bool& after) {
  co_await fail_after(gate, 1);
  after = true;  // never: the failure passes up
}

TEST(Steps, AFailureReachesWhoeverAwaits) {
  Gate gate;
  bool after = false;
  Steps s = await_failure(gate, after);
  s.start();
  gate.open_one();
  ASSERT_TRUE(s.done());
  EXPECT_FALSE(after);
  EXPECT_THROW(s.rethrow(), std::runtime_error);
}

Steps two_in_flight(std::vector<std::string>& log, Gate& a, Gate& b) {
  Steps first = record(log, a, "first", 1);
  Steps second = record(log, b, "second", 1);
  first.start();
  second.start();
  co_await second;  // may end in either order; awaiting takes whichever is left
  co_await first;
  log.push_back("both done");
}

TEST(Steps, WorkStartedInFlightIsAwaitedLater) {
  std::vector<std::string> log;
  Gate a, b;
  Steps s = two_in_flight(log, a, b);
  s.start();
  EXPECT_EQ(log, (std::vector<std::string>{"first begins", "second begins"}));
  a.open_one();  // the first ends while the caller awaits the second
  EXPECT_FALSE(s.done());
  b.open_one();
  EXPECT_TRUE(s.done());
  EXPECT_EQ(log.back(), "both done");
}

TEST(Steps, AnUnawaitedFailureIsReportedWhereStartSaid) {
  Gate gate;
  std::exception_ptr reported;
  Steps s = fail_after(gate, 1);
  s.start(&reported);
  EXPECT_FALSE(reported);
  gate.open_one();
  ASSERT_TRUE(s.done());
  ASSERT_TRUE(reported);
  EXPECT_THROW(std::rethrow_exception(reported), std::runtime_error);
}

struct Tracked {
  int& alive;
  explicit Tracked(int& a) : alive(a) { ++alive; }
  ~Tracked() { --alive; }
};

Steps hold(int& alive, Gate& gate) {
  Tracked t(alive);
  co_await gate;
}

TEST(Steps, DestroyingSuspendedWorkDestroysItsFrame) {
  int alive = 0;
  Gate gate;
  {
    Steps s = hold(alive, gate);
    s.start();
    EXPECT_EQ(alive, 1);
  }
  EXPECT_EQ(alive, 0);  // its locals went with it, though it never resumed
}

TEST(Steps, FramesAreReusedAcrossCalls) {
  // Many sequential calls must not grow memory without bound: each frame returns to the
  // cache and the next call takes it (checked by ASan in the sanitizer build).
  std::vector<std::string> log;
  Gate gate;
  for (int i = 0; i < 10000; ++i) {
    log.clear();
    Steps s = record(log, gate, "call", 0);
    s.start();
    ASSERT_TRUE(s.done());
  }
  EXPECT_EQ(log.back(), "call ends");
}

}  // namespace
}  // namespace strata::collectives
