#include <sched.h>

#include <atomic>

#include "strata/errors.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

namespace {
std::atomic<std::int64_t> g_spin_us{0};
}

void set_spin(std::chrono::microseconds us) { g_spin_us.store(us.count(), std::memory_order_relaxed); }
std::chrono::microseconds spin() { return std::chrono::microseconds(g_spin_us.load(std::memory_order_relaxed)); }

bool wait_all(Transport& t, std::span<const RequestPtr> reqs, Clock::time_point deadline) {
  const auto spin_until = Clock::now() + spin();
  for (unsigned round = 0;; ++round) {
    t.progress();
    // After abort every pending request fails too; report the abort, not its echoes.
    if (t.aborted()) throw AbortedError(t.abort_reason());
    bool all_done = true;
    for (const auto& r : reqs) {
      if (!r->done()) {
        all_done = false;
      } else if (!r->error().empty()) {
        throw TransportError(r->error());
      }
    }
    if (all_done) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      // Yield now and then so a peer rank sharing this core can run.
      if (round % 16 == 15) sched_yield();
      continue;
    }
    t.wait_event(std::min<std::chrono::microseconds>(
        std::chrono::microseconds(1000),
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
  }
}

bool settle(Transport& t, Clock::time_point deadline) {
  for (;;) {
    t.progress();
    if (t.settled() || t.aborted()) return true;  // aborted: nothing more will move
    const auto now = Clock::now();
    if (now >= deadline) return false;
    t.wait_event(std::min<std::chrono::microseconds>(
        std::chrono::microseconds(1000),
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
  }
}

}  // namespace strata::transport
