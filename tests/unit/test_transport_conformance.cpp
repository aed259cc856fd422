// One behavioural contract for every implementation of the transport seam
// (transport/transport.hpp), run against each of them in real forked rank processes.
// Every rank builds its transport through make_transport() over a FileStore in a fresh
// directory, exactly as a communicator would over its TCP store.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.hpp"
#include "temp_dir.hpp"
#include "bootstrap/file_store.hpp"
#include "strata/errors.hpp"
#include "transport/factory.hpp"
#include "core/settings_check.hpp"
#include "core/link_settings.hpp"
#include "wan/wan_transport.hpp"

namespace strata::transport {
namespace {

using namespace std::chrono_literals;
using test::require;
using Bytes = std::vector<unsigned char>;

constexpr auto kChildTimeout = std::chrono::milliseconds(30s);
constexpr auto kWaitBudget = 20s;

using test::TempDir;

// What each rank's body gets: its transport, the store (for out-of-band barriers) and n.
struct Rank {
  Transport& t;
  bootstrap::Store& store;
  int n;
  int rank() const { return t.rank(); }
};

// Content that depends on who sent it to whom, with which tag and size, so any misrouted,
// reordered or truncated message shows up as a byte mismatch.
Bytes pattern(int src, int dst, Tag tag, std::size_t size) {
  std::mt19937_64 gen((std::uint64_t(src) << 48) ^ (std::uint64_t(dst) << 32) ^ (tag << 20) ^
                      size);
  Bytes out(size);
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t v = gen();
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, size - i));
  }
  return out;
}

void check_received(const Bytes& buf, const RequestPtr& req, const Bytes& expected,
                    const std::string& what) {
  require(req->done() && req->error().empty(), what + ": request failed: " + req->error());
  require(req->bytes() == expected.size(), what + ": received " + std::to_string(req->bytes()) +
                                               " bytes, expected " +
                                               std::to_string(expected.size()));
  require(std::equal(expected.begin(), expected.end(), buf.begin()), what + ": payload differs");
}

void wait_ok(Transport& t, const std::vector<RequestPtr>& reqs, const std::string& what) {
  require(wait_all(t, reqs, Clock::now() + kWaitBudget), what + ": timed out");
}

// Every rank arrives before any leaves; runs over the store so it needs no transport.
// With `drive`, the rank keeps its transport moving while it waits: for a rank whose peer
// still needs it to move (acknowledge the rest of a message it already failed, say).
void barrier(Rank& r, const std::string& name, bool drive = false) {
  r.store.set("barrier/" + name + "/" + std::to_string(r.rank()), "");
  std::vector<std::string> keys;
  for (int p = 0; p < r.n; ++p) keys.push_back("barrier/" + name + "/" + std::to_string(p));
  const auto deadline = Clock::now() + kWaitBudget;
  for (;;) {
    try {
      r.store.get(keys, drive ? std::min(deadline, Clock::now() + 2ms) : deadline);
      return;
    } catch (const TimeoutError&) {
      if (!drive || Clock::now() >= deadline) throw;
    }
    r.t.progress();
  }
}

// Keeps UCX-style transports moving for a while without waiting on anything in particular.
void progress_for(Transport& t, std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    t.progress();
    t.wait_event(1ms);
  }
}

// The WAN link is no TransportKind a communicator picks; the suite runs it under a value
// past the enum's own, through this test-local factory.
constexpr auto kWan = static_cast<TransportKind>(100);

std::unique_ptr<Transport> make_for_test(TransportKind kind, int rank, int n,
                                         bootstrap::Store& store, Clock::time_point deadline) {
  if (kind == kWan) return wan::make_wan_transport(rank, n, store, deadline, detail::wan_options());
  return make_transport(kind, rank, n, store, deadline, {}, detail::check_settings({}).fabric);
}

class TransportConformance : public ::testing::TestWithParam<TransportKind> {
 protected:
  // `unexpected_bytes`: STRATA_UNEXPECTED_BYTES in every rank (0: the default).
  void run(int n, const std::function<void(Rank&)>& body, std::size_t unexpected_bytes = 0) {
    TempDir dir;
    const TransportKind kind = GetParam();
    const auto results = test::fork_ranks(n, kChildTimeout, [&](int rank) {
      if (unexpected_bytes) ::setenv("STRATA_UNEXPECTED_BYTES", std::to_string(unexpected_bytes).c_str(), 1);
      bootstrap::FileStore store(dir.path());
      auto t = make_for_test(kind, rank, n, store, Clock::now() + 10s);
      require(t->rank() == rank && t->size() == n, "transport reports the wrong rank or size");
      Rank r{*t, store, n};
      // Nobody tears down while a peer may still need it to make progress; a rank that
      // failed still checks in, so its peers report promptly instead of timing out here.
      std::exception_ptr failure;
      try {
        body(r);
        // A send may be done before its bytes arrived (the WAN link owns a copy): the
        // transport is driven until it has delivered them, as the seam asks.
        require(settle(*t, Clock::now() + kWaitBudget), "sends not delivered before the end");
      } catch (...) {
        failure = std::current_exception();
      }
      try {
        barrier(r, "end");
      } catch (...) {
        if (!failure) throw;
      }
      if (failure) std::rethrow_exception(failure);
    });
    EXPECT_EQ(test::failures(results), "");
  }

  // Every rank sends a distinct message to every other rank, for each size.
  void all_pairs(int n) {
    run(n, [](Rank& r) {
      const std::size_t sizes[] = {0, 1, 7, 4096, (1u << 20) + 3, 16u << 20};
      for (std::size_t size : sizes) {
        const Tag tag = 100 + size % 97;
        std::vector<Bytes> in(r.n), out(r.n);
        std::vector<RequestPtr> reqs, recvs(r.n);
        for (int p = 0; p < r.n; ++p) {
          if (p == r.rank()) continue;
          // Spare capacity: bytes() must report the message size, not the buffer size.
          in[p].assign(size + 16, 0xEE);
          recvs[p] = r.t.irecv(p, tag, in[p].data(), in[p].size());
          reqs.push_back(recvs[p]);
        }
        for (int p = 0; p < r.n; ++p) {
          if (p == r.rank()) continue;
          out[p] = pattern(r.rank(), p, tag, size);
          reqs.push_back(r.t.isend(p, tag, out[p].data(), size));
        }
        wait_ok(r.t, reqs, "size " + std::to_string(size));
        for (int p = 0; p < r.n; ++p) {
          if (p == r.rank()) continue;
          const std::string what = "size " + std::to_string(size) + " from " + std::to_string(p);
          check_received(in[p], recvs[p], pattern(p, r.rank(), tag, size), what);
          require(in[p][size] == 0xEE, what + ": wrote past the message");
        }
      }
    });
  }
};

TEST_P(TransportConformance, TwoRanksExchangeAllSizes) { all_pairs(2); }

TEST_P(TransportConformance, FourRanksExchangeAllSizes) { all_pairs(4); }

// Same peer, same tag: receives match messages in send order, even when small (eager)
// and large (rendezvous) messages alternate, and both directions run at once.
TEST_P(TransportConformance, SameTagMessagesArriveInOrder) {
  run(2, [](Rank& r) {
    constexpr int kCount = 64;
    constexpr Tag kTag = 5;
    const int peer = 1 - r.rank();
    auto size_of = [](int i) -> std::size_t { return i % 8 == 0 ? 300'000 + i : 64 + i; };
    std::vector<Bytes> in(kCount), out(kCount);
    std::vector<RequestPtr> recvs, reqs;
    for (int i = 0; i < kCount; ++i) {
      in[i].resize(size_of(i));
      recvs.push_back(r.t.irecv(peer, kTag, in[i].data(), in[i].size()));
    }
    for (int i = 0; i < kCount; ++i) {
      out[i] = pattern(r.rank(), peer, Tag(i), size_of(i));
      reqs.push_back(r.t.isend(peer, kTag, out[i].data(), out[i].size()));
    }
    reqs.insert(reqs.end(), recvs.begin(), recvs.end());
    wait_ok(r.t, reqs, "64 outstanding messages");
    for (int i = 0; i < kCount; ++i)
      check_received(in[i], recvs[i], pattern(peer, r.rank(), Tag(i), size_of(i)),
                     "message " + std::to_string(i));
  });
}

// Large and small messages back to back, sizes either side of where a transport stops
// staging bytes and reads them in place, half of them arriving before their receive.
TEST_P(TransportConformance, MixedSizesAroundTheDirectReadThresholdKeepTheirBytes) {
  run(2, [](Rank& r) {
    const std::size_t sizes[] = {300'000, 8, 16'384, 16'383, 16'385, 0, 65'537, 20'000,
                                 1, 70'000, 4'096, 1u << 20, 65'535, 3, 200'000, 17};
    constexpr std::size_t kFirst = 7;  // receives posted before the sends start
    constexpr Tag kTag = 11;
    const int peer = 1 - r.rank();
    const std::size_t n = std::size(sizes);
    std::vector<Bytes> in(n), out(n);
    std::vector<RequestPtr> recvs(n), reqs;
    auto post = [&](std::size_t i) {
      in[i].assign(sizes[i] + 8, 0xEE);
      recvs[i] = r.t.irecv(peer, kTag, in[i].data(), in[i].size());
      reqs.push_back(recvs[i]);
    };
    for (std::size_t i = 0; i < kFirst; ++i) post(i);
    barrier(r, "posted", true);
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = pattern(r.rank(), peer, Tag(i), sizes[i]);
      reqs.push_back(r.t.isend(peer, kTag, out[i].data(), sizes[i]));
    }
    progress_for(r.t, 100ms);
    for (std::size_t i = kFirst; i < n; ++i) post(i);
    wait_ok(r.t, reqs, "mixed sizes");
    for (std::size_t i = 0; i < n; ++i) {
      const std::string what = "message " + std::to_string(i) + " (" + std::to_string(sizes[i]) + " B)";
      check_received(in[i], recvs[i], pattern(peer, r.rank(), Tag(i), sizes[i]), what);
      require(in[i][sizes[i]] == 0xEE, what + ": wrote past the message");
    }
  });
}
// Receives posted in the reverse order of the sends still match by tag, including tags
// that use all kTagBits bits.
TEST_P(TransportConformance, TagsMatchRegardlessOfPostingOrder) {
  run(2, [](Rank& r) {
    std::vector<Tag> tags;
    for (Tag t = 1; t <= 16; ++t) tags.push_back(t * 7919);
    tags.push_back((Tag{1} << kTagBits) - 1);
    tags.push_back(0);
    if (r.rank() == 0) {
      std::vector<Bytes> out;
      std::vector<RequestPtr> reqs;
      for (std::size_t i = 0; i < tags.size(); ++i) {
        out.push_back(pattern(0, 1, tags[i], 1000 + i * 5000));
        reqs.push_back(r.t.isend(1, tags[i], out.back().data(), out.back().size()));
      }
      wait_ok(r.t, reqs, "sends");
    } else {
      std::vector<Bytes> in(tags.size());
      std::vector<RequestPtr> recvs(tags.size());
      for (std::size_t i = tags.size(); i-- > 0;) {
        in[i].resize(1000 + i * 5000);
        recvs[i] = r.t.irecv(0, tags[i], in[i].data(), in[i].size());
      }
      wait_ok(r.t, recvs, "receives");
      for (std::size_t i = 0; i < tags.size(); ++i)
        check_received(in[i], recvs[i], pattern(0, 1, tags[i], in[i].size()),
                       "tag " + std::to_string(tags[i]));
    }
  });
}

// Messages that arrive before their receive is posted are kept until it is.
TEST_P(TransportConformance, UnexpectedMessagesAreKept) {
  run(2, [](Rank& r) {
    const std::size_t sizes[] = {0, 10, 4096, 2u << 20};
    if (r.rank() == 0) {
      std::vector<Bytes> out;
      std::vector<RequestPtr> reqs;
      for (std::size_t i = 0; i < std::size(sizes); ++i) {
        out.push_back(pattern(0, 1, i, sizes[i]));
        reqs.push_back(r.t.isend(1, Tag(i), out.back().data(), sizes[i]));
      }
      progress_for(r.t, 300ms);
      barrier(r, "sent");
      wait_ok(r.t, reqs, "sends");
    } else {
      // Let everything land while nothing is posted.
      progress_for(r.t, 300ms);
      barrier(r, "sent");
      std::vector<Bytes> in(std::size(sizes));
      std::vector<RequestPtr> recvs;
      for (std::size_t i = 0; i < std::size(sizes); ++i) {
        in[i].resize(sizes[i]);
        recvs.push_back(r.t.irecv(0, Tag(i), in[i].data(), in[i].size()));
      }
      wait_ok(r.t, recvs, "late receives");
      for (std::size_t i = 0; i < std::size(sizes); ++i)
        check_received(in[i], recvs[i], pattern(0, 1, i, sizes[i]), "late message " +
                                                                        std::to_string(i));
    }
  });
}

// Messages larger than the memory a rank may hold for unexpected messages wait, unread,
// on their connection; they still arrive whole once their receives are posted, in any
// order, and messages behind them on the same connection follow.
TEST_P(TransportConformance, UnexpectedBeyondTheBudgetWaitsForItsReceive) {
  run(2, [](Rank& r) {
    const std::size_t sizes[] = {1u << 20, 100, 300u << 10, 0, 70u << 10};
    const std::size_t n = std::size(sizes);
    if (r.rank() == 0) {
      std::vector<Bytes> out;
      std::vector<RequestPtr> reqs;
      for (std::size_t i = 0; i < n; ++i) {
        out.push_back(pattern(0, 1, i, sizes[i]));
        reqs.push_back(r.t.isend(1, Tag(i), out.back().data(), sizes[i]));
      }
      progress_for(r.t, 300ms);
      barrier(r, "sent");
      wait_ok(r.t, reqs, "sends");
    } else {
      progress_for(r.t, 300ms);
      barrier(r, "sent");
      std::vector<Bytes> in(n);
      std::vector<RequestPtr> recvs(n);
      for (std::size_t k = n; k-- > 0;) {  // last message first
        in[k].resize(sizes[k]);
        recvs[k] = r.t.irecv(0, Tag(k), in[k].data(), in[k].size());
      }
      wait_ok(r.t, recvs, "receives posted after the messages");
      for (std::size_t i = 0; i < n; ++i)
        check_received(in[i], recvs[i], pattern(0, 1, i, sizes[i]), "message " + std::to_string(i));
    }
  }, 64u << 10);
}

TEST_P(TransportConformance, SendToSelf) {
  run(2, [](Rank& r) {
    const int me = r.rank();
    for (std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{(1u << 20) + 1}}) {
      const std::string what = "self message of " + std::to_string(size) + " bytes";
      // Receive posted first.
      Bytes in(size), out = pattern(me, me, 1, size);
      auto recv = r.t.irecv(me, 1, in.data(), in.size());
      auto send = r.t.isend(me, 1, out.data(), out.size());
      wait_ok(r.t, {recv, send}, what);
      check_received(in, recv, out, what);
      // Send posted first.
      Bytes in2(size), out2 = pattern(me, me, 2, size);
      auto send2 = r.t.isend(me, 2, out2.data(), out2.size());
      auto recv2 = r.t.irecv(me, 2, in2.data(), in2.size());
      wait_ok(r.t, {recv2, send2}, what + " (send first)");
      check_received(in2, recv2, out2, what + " (send first)");
    }
  });
}

// A message larger than its receive buffer fails that receive, names the sender, and the
// next message with the same tag is delivered intact.
TEST_P(TransportConformance, TooSmallReceiveFailsCleanly) {
  run(2, [](Rank& r) {
    for (std::size_t big : {std::size_t{8192}, std::size_t{1u << 20}}) {
      const Tag tag = 7 + big;
      const Bytes first = pattern(0, 1, tag, big), next = pattern(0, 1, tag + 1, 100);
      if (r.rank() == 0) {
        auto a = r.t.isend(1, tag, first.data(), first.size());
        auto b = r.t.isend(1, tag, next.data(), next.size());
        // The sender may or may not learn of the receiver's failure; both are fine.
        try {
          wait_all(r.t, std::vector<RequestPtr>{a, b}, Clock::now() + kWaitBudget);
        } catch (const TransportError&) {
        }
      } else {
        Bytes small(4096), in(100);
        auto bad = r.t.irecv(0, tag, small.data(), small.size());
        bool threw = false;
        try {
          wait_all(r.t, std::vector<RequestPtr>{bad}, Clock::now() + kWaitBudget);
        } catch (const TransportError& e) {
          threw = true;
          require(std::string(e.what()).find("truncated") != std::string::npos,
                  std::string("unexpected truncation error: ") + e.what());
        }
        require(threw, "a " + std::to_string(big) + "-byte message fit a 4096-byte buffer");
        require(bad->done() && bad->error().find("rank 0") != std::string::npos,
                "truncation error does not name the sender: " + bad->error());
        auto good = r.t.irecv(0, tag, in.data(), in.size());
        wait_ok(r.t, {good}, "message after the truncated one");
        check_received(in, good, next, "message after the truncated one");
      }
      // The truncated message's later stripes may still be unread on another WAN stream
      // when the one after it completes; the sender waits for them to be acknowledged.
      barrier(r, "round" + std::to_string(big), /*drive=*/true);
    }
  });
}

// abort() from another thread wakes a blocked wait promptly with AbortedError; the
// pending request and any later one fail, saying why.
TEST_P(TransportConformance, AbortFromAnotherThreadStopsWaiting) {
  run(2, [](Rank& r) {
    if (r.rank() == 0) {
      Bytes in(64);
      auto never = r.t.irecv(1, 3, in.data(), in.size());
      // jthread: joined even when a check below throws.
      std::jthread aborter([&] {
        std::this_thread::sleep_for(200ms);
        r.t.abort("test says stop");
      });
      const auto start = Clock::now();
      std::string outcome = "wait_all returned";
      try {
        wait_all(r.t, std::vector<RequestPtr>{never}, Clock::now() + kWaitBudget);
      } catch (const AbortedError&) {
        outcome.clear();
      } catch (const std::exception& e) {
        outcome = std::string("wait_all threw another error: ") + e.what();
      }
      const auto took = Clock::now() - start;
      aborter.join();
      require(outcome.empty(), "no AbortedError after abort(): " + outcome);
      require(took < 2s, "abort took " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                took).count()) + " ms to end the wait");
      require(r.t.aborted(), "aborted() is false after abort()");
      r.t.progress();
      require(never->done() && never->error().find("test says stop") != std::string::npos,
              "pending receive did not fail with the abort reason: " + never->error());
      auto later = r.t.isend(1, 3, in.data(), in.size());
      for (int i = 0; i < 100 && !later->done(); ++i) r.t.progress();
      require(later->done() && later->error().find("aborted") != std::string::npos,
              "send after abort did not fail: " + later->error());
    }
  });
}

// With nothing arriving, wait_all gives up at its deadline and leaves the request pending.
TEST_P(TransportConformance, WaitReturnsFalseAtDeadline) {
  run(2, [](Rank& r) {
    Bytes in(16);
    auto req = r.t.irecv(1 - r.rank(), 9, in.data(), in.size());
    const auto start = Clock::now();
    const bool ok = wait_all(r.t, std::vector<RequestPtr>{req}, start + 300ms);
    const auto took = Clock::now() - start;
    require(!ok, "wait_all reported success with no message sent");
    require(took >= 300ms && took < 2s, "wait_all did not return at its deadline");
    require(!req->done(), "the receive completed without a message");
  });
}

// Callers may drop a request before it completes; the transport still finishes it.
TEST_P(TransportConformance, DroppedRequestsStillComplete) {
  run(2, [](Rank& r) {
    const Bytes big = pattern(0, 1, 4, 3u << 20);
    if (r.rank() == 0) {
      r.t.isend(1, 4, big.data(), big.size());
      Bytes ack(1);
      wait_ok(r.t, {r.t.irecv(1, 5, ack.data(), ack.size())}, "ack");
    } else {
      Bytes in(big.size());
      auto recv = r.t.irecv(0, 4, in.data(), in.size());
      wait_ok(r.t, {recv}, "dropped send");
      check_received(in, recv, big, "dropped send");
      const unsigned char one = 1;
      wait_ok(r.t, {r.t.isend(0, 5, &one, 1)}, "ack");
    }
  });
}

// Reading a peer's memory: over UCX every rank of this host may (the forked ranks share
// it), and gets exactly the peer's bytes; an address the peer does not map is a
// TransportError naming the peer. Other transports share nothing and refuse every read.
// Calls f and returns what it threw ("" if nothing).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

// Over UCX and TCP, every rank sees what its peers put in their slots of the host's
// segment; the WAN link alone has no segment, and asking for a slot names the peer.
TEST_P(TransportConformance, SharedSlotsOnlyWhereMemoryIsShared) {
  run(3, [](Rank& r) {
    const bool shared = GetParam() != kWan;
    const std::size_t slot_bytes = r.t.shared_slot_bytes();
    require((slot_bytes >= (std::size_t{1} << 20)) == shared, "slot size " + std::to_string(slot_bytes));
    if (shared) {
      const Bytes mine = pattern(r.rank(), -1, 1, slot_bytes);
      std::memcpy(r.t.shared_slot(r.rank()), mine.data(), mine.size());
    }
    barrier(r, "slots filled");
    for (int p = 0; p < r.n; ++p) {
      if (p == r.rank()) continue;
      const std::string peer = "rank " + std::to_string(p);
      require(r.t.shares_memory(p) == shared, "shares_memory(" + std::to_string(p) + ") is wrong");
      if (!shared) {
        const std::string refused = refusal([&] { r.t.shared_slot(p); });
        require(refused.find(peer) != std::string::npos, "slot refusal: " + refused);
        continue;
      }
      const Bytes theirs = pattern(p, -1, 1, slot_bytes);
      require(std::memcmp(r.t.shared_slot(p), theirs.data(), theirs.size()) == 0, peer + "'s slot differs");
    }
    barrier(r, "read");  // no rank refills its slot before all have read it
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformance,
                         ::testing::Values(TransportKind::ucx, TransportKind::tcp),
                         [](const auto& info) { return std::string(to_string(info.param)); });
INSTANTIATE_TEST_SUITE_P(Wan, TransportConformance, ::testing::Values(kWan),
                         [](const auto&) { return std::string("wan"); });

}  // namespace
}  // namespace strata::transport
