// The WAN link between forked ranks on loopback: byte-exact delivery at every size,
// survival of streams cut mid-transfer, and the emulated path (delay, window, rate)
// behaving like the real one would: more streams move more data per round trip. Also
// the link's byte counters as a communicator reports them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bootstrap/file_store.hpp"
#include "collectives/patterns.hpp"
#include "core/fingerprint.hpp"
#include "core/link_settings.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"
#include "temp_dir.hpp"
#include "wan/wan_transport.hpp"
#include "wan_exchange.hpp"

namespace strata::wan {
namespace {

using namespace std::chrono_literals;
using test::require;

using test::barrier;
using test::exchange;
using test::kChildTimeout;
using test::kWaitBudget;
using test::random_bytes;
using test::run_ranks;
using Bytes = test::Bytes;

using test::TempDir;

const std::vector<std::size_t> kSizes = {0, 1, 7, (1u << 20) + 3, 32u << 20};

TEST(WanLink, TwoRanksExchangeRandomData) {
  const auto rs = run_ranks(2, WanOptions{}, [](transport::Transport& t, bootstrap::Store& s) {
    exchange(t, s, 2, kSizes, 1);
  });
  EXPECT_EQ(test::failures(rs), "");
}

TEST(WanLink, ThreeRanksExchangeRandomData) {
  WanOptions opt;
  opt.streams = 3;
  opt.stripe_bytes = 256u << 10;
  const auto rs = run_ranks(3, opt, [](transport::Transport& t, bootstrap::Store& s) {
    exchange(t, s, 3, kSizes, 1);
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Small messages go on the latency lane's streams, larger ones on the bulk lane's, and a
// small send overtakes a large one still waiting for a stream: receives must still match
// in the order of the sends under one tag (the seam's FIFO per source and tag), whether
// they were posted before the bytes came or after, at and around the lane's limit.
TEST(WanLink, LanesKeepTheOrderOfSendsPerTag) {
  WanOptions opt;
  opt.streams = 2;
  opt.latency_streams = 2;
  const std::size_t limit = opt.latency_bytes();
  const std::vector<std::size_t> sizes = {3u << 20, 1, limit, limit + 1, 0, (1u << 20) + 5, 7, limit - 1, 9000};
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  const auto rs = run_ranks(2, opt, [&](transport::Transport& t, bootstrap::Store& s) {
    const int me = t.rank(), peer = 1 - me;
    for (int round = 0; round < 2; ++round) {
      const bool posted_first = round == 0;
      std::vector<Bytes> out, in(sizes.size(), Bytes(most, 0xEE));
      std::vector<transport::RequestPtr> sends, recvs;
      auto post = [&] {
        for (std::size_t i = 0; i < sizes.size(); ++i) recvs.push_back(t.irecv(peer, 3, in[i].data(), most));
      };
      if (posted_first) post();
      barrier(s, me, 2, "posted" + std::to_string(round));
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        out.push_back(random_bytes(me, peer, sizes[i], std::uint64_t(round) * 100 + i));
        sends.push_back(t.isend(peer, 3, out.back().data(), sizes[i]));
      }
      if (!posted_first) {
        // Let every message arrive unexpected before its receive is posted.
        require(transport::settle(t, transport::Clock::now() + kWaitBudget), "sends not acknowledged in time");
        barrier(s, me, 2, "sent" + std::to_string(round));
        post();
      }
      std::vector<transport::RequestPtr> all = sends;
      all.insert(all.end(), recvs.begin(), recvs.end());
      require(transport::wait_all(t, all, transport::Clock::now() + kWaitBudget), "timed out");
      require(transport::settle(t, transport::Clock::now() + kWaitBudget), "sends not acknowledged in time");
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::string what = "round " + std::to_string(round) + ", receive " + std::to_string(i);
        require(recvs[i]->bytes() == sizes[i], what + ": got " + std::to_string(recvs[i]->bytes()) + " bytes, want " +
                                                   std::to_string(sizes[i]) + " (out of order)");
        const Bytes want = random_bytes(peer, me, sizes[i], std::uint64_t(round) * 100 + i);
        require(std::equal(want.begin(), want.end(), in[i].begin()), what + ": payload differs");
      }
    }
    barrier(s, me, 2, "done");
  });
  EXPECT_EQ(test::failures(rs), "");
}

// A stream dropped after a few frames is reconnected and its unacknowledged frames
// resent; the receiver drops the duplicates, and every message arrives intact.
TEST(WanLink, StreamCutMidTransferLosesNothing) {
  WanOptions opt;
  opt.stripe_bytes = 64u << 10;
  opt.emulation.cut_after = 5;
  const auto rs = run_ranks(2, opt, [](transport::Transport& t, bootstrap::Store& s) {
    const auto reconnects = exchange(t, s, 2, {(4u << 20) + 1, 100, 3u << 20}, 2);
    require(reconnects == 1, "expected exactly one cut stream, saw " + std::to_string(reconnects));
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Random stream drops throughout (2% of frames) on three ranks.
TEST(WanLink, RandomStreamLossLosesNothing) {
  WanOptions opt;
  opt.stripe_bytes = 64u << 10;
  opt.emulation.loss = 0.02;
  const auto rs = run_ranks(3, opt, [](transport::Transport& t, bootstrap::Store& s) {
    const auto reconnects = exchange(t, s, 3, {(2u << 20) + 5, 0, 33}, 8);
    std::cout << "reconnects " << reconnects << std::endl;
    // ~560 frames leave each rank: no break at all has odds of about 1e-5.
    require(reconnects >= 1, "2% loss over ~560 frames broke no stream");
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Frames whose CRC does not match are a broken stream: the receiver drops it, the sender
// reconnects and resends, and nothing corrupt reaches a receive buffer.
TEST(WanLink, CrcMismatchBreaksStreamAndResends) {
  WanOptions opt;
  opt.stripe_bytes = 64u << 10;
  opt.emulation.corrupt = 0.02;
  const auto rs = run_ranks(2, opt, [](transport::Transport& t, bootstrap::Store& s) {
    const auto reconnects = exchange(t, s, 2, {(4u << 20) + 9, 1, 0}, 8);
    std::cout << "reconnects " << reconnects << std::endl;
    require(reconnects >= 1, "2% corrupt frames over ~530 frames broke no stream");
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Seconds for rank 0 to send `bytes` to rank 1 and have every stripe acknowledged.
double one_way_seconds(transport::Transport& t, bootstrap::Store& store, std::size_t bytes,
                       const std::string& name) {
  Bytes buf = random_bytes(0, 1, bytes, 5);
  barrier(store, t.rank(), 2, name + "-start");
  const auto start = Clock::now();
  if (t.rank() == 0) {
    require(transport::wait(t, t.isend(1, 9, buf.data(), bytes), Clock::now() + kWaitBudget),
            name + ": send timed out");
    require(transport::settle(t, Clock::now() + kWaitBudget), name + ": not acknowledged in time");
  } else {
    Bytes in(bytes);
    require(transport::wait(t, t.irecv(0, 9, in.data(), in.size()), Clock::now() + kWaitBudget),
            name + ": receive timed out");
    require(in == buf, name + ": payload differs");
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  barrier(store, t.rank(), 2, name + "-end");
  return s;
}

// With 20 ms one way and a 256 KiB window per stream, one stream moves at most 256 KiB
// per 40 ms round trip (~6.5 MB/s); four streams carry four windows per round trip.
TEST(WanLink, MoreStreamsBeatOneUnderDelay) {
  TempDir dir;
  constexpr std::size_t kBytes = 8u << 20;
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    auto base = std::make_shared<bootstrap::FileStore>(dir.path());
    double secs[2] = {0, 0};
    const int ks[2] = {1, 4};
    for (int i = 0; i < 2; ++i) {
      WanOptions opt;
      opt.streams = ks[i];
      opt.emulation = parse_emulation("delay=20ms,window=256k");
      bootstrap::PrefixStore store(base, "k" + std::to_string(ks[i]) + "/");
      auto t = make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
      secs[i] = one_way_seconds(*t, store, kBytes, "k" + std::to_string(ks[i]));
    }
    if (rank != 0) return;
    const double mb = double(kBytes) / 1e6;
    std::cout << "delay=20ms window=256k, " << mb << " MB: K=1 " << secs[0] << " s ("
              << mb / secs[0] << " MB/s), K=4 " << secs[1] << " s (" << mb / secs[1]
              << " MB/s)" << std::endl;
    require(secs[0] > 1.5 * secs[1], "K=4 streams were not clearly faster than K=1");
  });
  EXPECT_EQ(test::failures(rs), "");
  std::cout << rs[0].output;
}

// A lane narrowed to two of four bulk streams writes only on those two (and its latency
// lane); without narrowing every bulk stream takes stripes. Bytes arrive exact either way.
TEST(WanLink, ANarrowedBulkLaneLeavesTheOtherStreamsIdle) {
  TempDir dir;
  constexpr std::size_t kBytes = (8u << 20) + 3;
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    auto base = std::make_shared<bootstrap::FileStore>(dir.path());
    for (const int narrow : {2, 0}) {
      WanOptions opt;
      opt.streams = 4;
      opt.stripe_bytes = 64u << 10;
      opt.narrow_streams = narrow;
      opt.narrow_above = 1;  // any rate keeps it narrow
      const std::string name = "narrow" + std::to_string(narrow);
      bootstrap::PrefixStore store(base, name + "/");
      auto t = make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
      one_way_seconds(*t, store, kBytes, name);
      if (rank != 0) continue;
      const auto frames = dynamic_cast<WanTransport&>(*t).frames_written(1);
      require(frames.size() == 6, name + ": expected 4 bulk and 2 latency streams");
      const std::uint64_t idle = frames[2] + frames[3];
      require(frames[0] > 0 && frames[1] > 0, name + ": a stream of the narrowed lane carried nothing");
      if (narrow) require(idle == 0, name + ": " + std::to_string(idle) + " frames on streams set aside");
      else require(frames[2] > 0 && frames[3] > 0, name + ": a bulk stream carried nothing");
    }
  });
  EXPECT_EQ(test::failures(rs), "");
}

// The library's own settings: four bulk streams narrowed to two when nothing is said, the
// count asked for (STRATA_WAN_STREAMS) kept as it is.
TEST(WanLink, TheDefaultLaneNarrowsAndAnAskedCountIsKept) {
  ::unsetenv("STRATA_WAN_STREAMS");
  ::unsetenv("STRATA_WAN_BDP_BYTES");
  const WanOptions def = detail::wan_options();
  EXPECT_EQ(def.streams, 4);
  EXPECT_EQ(def.narrow_streams, 2);
  EXPECT_GT(def.narrow_above, 0);
  ::setenv("STRATA_WAN_STREAMS", "3", 1);
  const WanOptions asked = detail::wan_options();
  ::unsetenv("STRATA_WAN_STREAMS");
  EXPECT_EQ(asked.streams, 3);
  EXPECT_EQ(asked.narrow_streams, 0);
}

// Loopback figures without emulation, printed for the record (no assertion: loopback
// speed says little about a WAN and varies with the machine).
TEST(WanLink, LoopbackThroughputFigures) {
  TempDir dir;
  constexpr std::size_t kBytes = 64u << 20;
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    auto base = std::make_shared<bootstrap::FileStore>(dir.path());
    for (int k : {1, 4}) {
      WanOptions opt;
      opt.streams = k;
      bootstrap::PrefixStore store(base, "k" + std::to_string(k) + "/");
      auto t = make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
      const double s = one_way_seconds(*t, store, kBytes, "k" + std::to_string(k));
      if (rank == 0)
        std::cout << "loopback, 64 MiB: K=" << k << " " << double(kBytes) / 1e6 / s << " MB/s"
                  << std::endl;
    }
  });
  EXPECT_EQ(test::failures(rs), "");
  std::cout << rs[0].output;
}

// The token bucket holds a pair to its emulated rate: 4 MB at 100 Mbit/s, less the
// initial burst of one stripe, takes at least 0.27 s.
TEST(WanLink, EmulatedRateIsRespected) {
  WanOptions opt;
  opt.emulation = parse_emulation("rate=100mbit");
  TempDir dir;
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    bootstrap::FileStore store(dir.path());
    auto t = make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
    const double s = one_way_seconds(*t, store, 4'000'000, "rate");
    if (rank == 0) std::cout << "rate=100mbit: 4 MB in " << s << " s" << std::endl;
    require(s >= 0.25 && s < 5, "4 MB at 100 Mbit/s took " + std::to_string(s) + " s");
  });
  EXPECT_EQ(test::failures(rs), "");
  std::cout << rs[0].output;
}

// A send completes once the link owns its bytes, not a round trip later: under 150 ms of
// emulated one-way delay, rank 0's sends of 0, 1 and 1 MiB+3 bytes are done within 50 ms,
// and it overwrites their buffers at once; rank 1 still receives the original bytes, and
// rank 0's transport settles only once the acknowledgements are back (two delays). A
// send larger than what the link keeps per peer (STRATA_WAN_SEND_BUFFER, 2 MiB here)
// completes on its acknowledgement, as every send does with a send buffer of 0; it also
// times the round trip, against which the link prices copying larger sends.
TEST(WanLink, SendCompletesWhenTheLinkOwnsItsBytes) {
  for (const std::size_t buffer : {std::size_t{2} << 20, std::size_t{0}}) {
    WanOptions opt;
    opt.emulation = parse_emulation("delay=150ms");
    opt.send_buffer = buffer;
    const auto rs = run_ranks(2, opt, [&](transport::Transport& t, bootstrap::Store& store) {
      const std::vector<std::size_t> sizes = {3u << 20, 0, 1, (1u << 20) + 3};  // owned ones last
      const std::string name = "buffer" + std::to_string(buffer);
      if (t.rank() == 1) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          Bytes in(sizes[i] + 1, 0xEE);
          require(transport::wait(t, t.irecv(0, 4, in.data(), in.size()), Clock::now() + kWaitBudget), "receive");
          const Bytes want = random_bytes(0, 1, sizes[i], i);
          require(std::equal(want.begin(), want.end(), in.begin()), name + ": message " + std::to_string(i) + " differs");
        }
        barrier(store, 1, 2, name);
        return;
      }
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        Bytes out = random_bytes(0, 1, sizes[i], i);
        const auto start = Clock::now();
        require(transport::wait(t, t.isend(1, 4, out.data(), out.size()), Clock::now() + kWaitBudget), "send");
        const double took = std::chrono::duration<double>(Clock::now() - start).count();
        std::fill(out.begin(), out.end(), 0);  // the caller's buffer is free once the send is done
        const bool owned = buffer > 0 && sizes[i] <= buffer;
        std::cout << name << ": send of " << sizes[i] << " B done in " << took * 1e3 << " ms" << std::endl;
        if (owned)
          require(took < 0.05, name + ": a send of " + std::to_string(sizes[i]) + " B the link could own took " +
                                   std::to_string(took) + " s");
        else
          require(took > 0.25, name + ": a send of " + std::to_string(sizes[i]) +
                                   " B completed before its acknowledgement could come (" + std::to_string(took) + " s)");
      }
      const auto start = Clock::now();
      require(transport::settle(t, Clock::now() + kWaitBudget), name + ": never settled");
      const double settled = std::chrono::duration<double>(Clock::now() - start).count();
      if (buffer > 0)
        require(settled > 0.2, name + ": settled after " + std::to_string(settled) +
                                   " s, before any acknowledgement could come back");
      barrier(store, 0, 2, name);
    });
    EXPECT_EQ(test::failures(rs), "") << "send buffer " << buffer;
  }
}

// Completed sends still on their way when the transport is destroyed are delivered first:
// rank 0 sends 64 messages of 64 KiB (each copied and done at once) under 100 ms of delay
// and leaves at once; rank 1 gets every byte.
TEST(WanLink, ClosingDeliversCompletedSends) {
  WanOptions opt;
  opt.emulation = parse_emulation("delay=100ms");
  constexpr int kMessages = 64;
  const auto rs = run_ranks(2, opt, [&](transport::Transport& t, bootstrap::Store& store) {
    std::vector<Bytes> out;
    for (int i = 0; i < kMessages; ++i) out.push_back(random_bytes(0, 1, 64u << 10, 9 + i));
    if (t.rank() == 0) {
      barrier(store, 0, 2, "posted");
      const auto start = Clock::now();
      for (const Bytes& m : out)
        require(transport::wait(t, t.isend(1, 6, m.data(), m.size()), Clock::now() + kWaitBudget), "send");
      require(Clock::now() - start < 100ms, "the sends waited for their acknowledgements");
      require(!t.settled(), "nothing left to deliver when closing");
      return;  // the transport is destroyed with the bytes unacknowledged
    }
    std::vector<Bytes> in(kMessages, Bytes(64u << 10));
    std::vector<RequestPtr> recvs;
    for (auto& b : in) recvs.push_back(t.irecv(0, 6, b.data(), b.size()));
    barrier(store, 1, 2, "posted");
    require(transport::wait_all(t, recvs, Clock::now() + kWaitBudget), "receives");
    for (int i = 0; i < kMessages; ++i)
      require(in[i] == out[i], "message " + std::to_string(i) + ", completed before its sender closed, differs");
  });
  EXPECT_EQ(test::failures(rs), "");
}

// A rank that closes its transport says goodbye on its streams: a peer still waiting to
// receive from it fails at once, naming it, instead of waiting out its deadline (a
// broken stream, which reconnects, sends no goodbye).
TEST(WanLink, ClosedPeerFailsPendingReceivesPromptly) {
  WanOptions opt;
  opt.streams = 2;
  const auto rs = run_ranks(2, opt, [&](transport::Transport& t, bootstrap::Store& store) {
    exchange(t, store, 2, {1000}, 1);  // streams up in both directions
    if (t.rank() == 1) return;        // leaves: the transport is destroyed
    Bytes buf(64);
    const auto start = Clock::now();
    auto r = t.irecv(1, 9, buf.data(), buf.size());
    std::string error;
    try {
      transport::wait(t, r, Clock::now() + 30s);
    } catch (const TransportError& e) {
      error = e.what();
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    require(error.find("rank 1 closed its WAN link") != std::string::npos, "error: '" + error + "'");
    require(waited < 5, "took " + std::to_string(waited) + " s to notice");
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Rank 1 sends `sizes` to rank 0 and closes its transport as soon as the frames are on
// the wire, without waiting for acknowledgements; rank 0 posted its receives first. The
// goodbye that follows must not fail a receive whose data was sent: each arrives whole,
// and only a receive no message can satisfy fails, naming rank 1. `rounds` fresh pairs.
void leave_right_after_sending(const WanOptions& opt, const std::vector<std::size_t>& sizes, int rounds) {
  TempDir dir;
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    auto base = std::make_shared<bootstrap::FileStore>(dir.path());
    for (int round = 0; round < rounds; ++round) {
      const std::string name = "r" + std::to_string(round);
      bootstrap::PrefixStore store(base, name + "/");
      auto t = make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
      std::vector<Bytes> bufs;
      for (std::size_t i = 0; i < sizes.size(); ++i) bufs.push_back(random_bytes(1, 0, sizes[i], i + 1));
      if (rank == 1) {
        barrier(store, rank, 2, name + "-posted");
        std::size_t expect = 0;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          t->isend(0, 5, bufs[i].data(), sizes[i]);
          expect += sizes[i] + link::kHeaderBytes;
        }
        const auto until = Clock::now() + 10s;
        while (t->report().traffic().wan_wire_sent < expect && Clock::now() < until) t->progress();
        require(t->report().traffic().wan_wire_sent >= expect, name + ": frames not written within 10 s");
        continue;  // leaves at once: the transport is destroyed
      }
      std::vector<Bytes> in(sizes.size());
      std::vector<RequestPtr> recvs;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        in[i].assign(sizes[i] + 1, 0xEE);
        recvs.push_back(t->irecv(1, 5, in[i].data(), in[i].size()));
      }
      barrier(store, rank, 2, name + "-posted");
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::string what = name + ", message " + std::to_string(i);
        try {
          require(transport::wait(*t, recvs[i], Clock::now() + 20s), what + ": timed out");
        } catch (const TransportError& e) {
          throw std::runtime_error(what + " failed although its data was sent: " + e.what());
        }
        require(recvs[i]->bytes() == sizes[i] && std::equal(bufs[i].begin(), bufs[i].end(), in[i].begin()),
                what + ": payload differs");
      }
      Bytes extra(8);
      std::string error;
      try {
        transport::wait(*t, t->irecv(1, 5, extra.data(), extra.size()), Clock::now() + 20s);
      } catch (const TransportError& e) {
        error = e.what();
      }
      require(error.find("rank 1 closed its WAN link") != std::string::npos,
              name + ": a receive nothing was sent for ended with '" + error + "'");
    }
  });
  EXPECT_EQ(test::failures(rs), "");
}

// Under emulated delay the receiver holds frames until their due time; the goodbye behind
// them on the same stream is held too, so it cannot overtake them.
TEST(WanLink, GoodbyeWaitsBehindDelayedFrames) {
  WanOptions opt;
  opt.streams = 2;
  opt.emulation = parse_emulation("delay=50ms");
  leave_right_after_sending(opt, {100, 300u << 10, 0}, 3);
}

// More streams than messages: the goodbye on the idle streams arrives while the one
// large stripe is still being read from the busy one; it says how many messages were
// sent, so the receive keeps waiting for that one.
TEST(WanLink, GoodbyeOnIdleStreamsWaitsForDataOnOthers) {
  WanOptions opt;
  opt.streams = 8;
  opt.stripe_bytes = 16u << 20;
  leave_right_after_sending(opt, {6u << 20}, 5);
}

// Two regions of one rank each, flat ring allreduce: each rank sends the piece it reduces
// (reduce-scatter) and the piece it owns at the end (allgather), plus the fingerprint every
// collective sends to the next rank. An odd count makes the two pieces differ in size.
TEST(WanLink, CommunicatorCountsRingAllreduceBytes) {
  constexpr std::size_t kCount = (1u << 20) + 3;
  const std::string root = test::free_root_address();
  const auto rs = test::fork_ranks(2, kChildTimeout, [&](int rank) {
    ::setenv("STRATA_REGION", rank == 0 ? "us" : "eu", 1);
    ::setenv("STRATA_HOST", rank == 0 ? "u0" : "e0", 1);
    ::setenv("STRATA_ALGO", "flat", 1);
    ::setenv("STRATA_WAN_EMULATE", "", 1);
    ::setenv("STRATA_WAN_LINK", "1", 1);
    ::setenv("STRATA_TIMEOUT_S", "30", 1);
    // Nothing else crosses the WAN, so the counters since creation are the allreduce's:
    // a snapshot taken before it could already hold the first frames of a peer that
    // started first.
    ::setenv("STRATA_PROBE", "0", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, 2, root, o);
    std::vector<float> buf(kCount, 1.0f + static_cast<float>(rank));
    const TrafficStats before{};
    comm.allreduce(buf.data(), buf.data(), kCount, DataType::f32, ReduceOp::sum).wait();
    const TrafficStats after = comm.traffic();
    require(buf.front() == 3.0f && buf.back() == 3.0f, "wrong allreduce result");

    const auto piece = [&](int i) { return collectives::piece_size(kCount, 2, static_cast<std::size_t>(i)); };
    const int rs_sent = collectives::ring_rs_send_seg(rank, 0, 0, 2);
    const int ag_sent = collectives::ring_rs_final_seg(rank, 0, 2);
    const std::uint64_t expect =
        (piece(rs_sent) + piece(ag_sent)) * sizeof(float) + sizeof(detail::Fingerprint);
    const std::uint64_t sent = after.wan_bytes_sent - before.wan_bytes_sent;
    const std::uint64_t wire = after.wan_wire_bytes_sent - before.wan_wire_bytes_sent;
    const std::uint64_t received = after.wan_bytes_received - before.wan_bytes_received;
    const std::string what = "rank " + std::to_string(rank) + ": sent " + std::to_string(sent) +
                             ", wire " + std::to_string(wire) + ", received " +
                             std::to_string(received) + ", expected " + std::to_string(expect);
    require(sent == expect, what);
    // Every data frame is written before its send completes; each carries a header.
    require(wire >= sent + 2 * link::kHeaderBytes, what);
    // The other rank sends the two pieces this one does not: the same total.
    require(received == expect, what);
    require(after.wan_bytes_resent == 0, what + ": resent bytes on an unbroken link");
    std::cout << what << std::endl;
  });
  EXPECT_EQ(test::failures(rs), "");
  std::cout << rs[0].output;
}

}  // namespace
}  // namespace strata::wan
