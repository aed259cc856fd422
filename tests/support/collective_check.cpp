#include "collective_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "device/memory.hpp"
#include "fork_ranks.hpp"
#include "reference.hpp"

namespace strata::test {

std::string Case::name() const {
    std::ostringstream s;
    s << to_string(kind) << " " << to_string(dt) << " " << to_string(op) << " count " << count
      << " root " << root << (in_place ? " in-place" : " out-of-place");
    return s.str();
}

namespace {
bool is_reduction(CollectiveKind k) {
  return k == CollectiveKind::allreduce || k == CollectiveKind::reduce_scatter ||
         k == CollectiveKind::reduce;
}

}  // namespace

std::vector<Case> cases(int p, bool large) {
  const CollectiveKind kinds[] = {CollectiveKind::allreduce, CollectiveKind::reduce_scatter,
                                  CollectiveKind::allgather, CollectiveKind::broadcast,
                                  CollectiveKind::reduce};
  const std::size_t sizes[] = {0, 1, 7, static_cast<std::size_t>(1000 + p), 20011};
  std::vector<Case> out;
  for (auto k : kinds)
    for (int d = 0; d < kNumDataTypes; ++d)
      for (int o = 0; o < (is_reduction(k) ? kNumReduceOps : 1); ++o) {
        const auto dt = static_cast<DataType>(d);
        const auto op = static_cast<ReduceOp>(o);
        if (op == ReduceOp::avg && !is_floating(dt)) continue;
        for (std::size_t i = 0; i < std::size(sizes); ++i)
          out.push_back({k, dt, op, sizes[i], static_cast<int>(i) % p, (i + d) % 2 == 1});
      }
  if (large) {
    out.push_back({CollectiveKind::allreduce, DataType::f32, ReduceOp::sum, (4u << 20) + 3, 0, false});
    out.push_back({CollectiveKind::allreduce, DataType::bf16, ReduceOp::sum, (1u << 20) + 1, 0, true});
    out.push_back({CollectiveKind::reduce_scatter, DataType::f32, ReduceOp::sum, (1u << 20) + 5, 0, false});
    out.push_back({CollectiveKind::allgather, DataType::i32, ReduceOp::sum, (1u << 20) + 5, 0, true});
    out.push_back({CollectiveKind::broadcast, DataType::f64, ReduceOp::sum, (1u << 20) + 7, p - 1, false});
    out.push_back({CollectiveKind::reduce, DataType::f32, ReduceOp::max, (1u << 20) + 7, p / 2, false});
  }
  return out;
}

// Runs one case on this rank; returns a failure description or "".
std::string run_case(Communicator& comm, const Case& c, std::uint64_t case_id, const CallOptions& o,
                     Memory memory) {
  const int p = comm.size(), me = comm.rank();
  const std::size_t esz = dtype_size(c.dt);
  const bool scatter = c.kind == CollectiveKind::reduce_scatter;
  const bool gather = c.kind == CollectiveKind::allgather;
  // Per-rank input length and output length, in elements.
  const std::size_t in_n = scatter ? c.count * p : c.count;
  const std::size_t out_n = gather ? c.count * p : (scatter ? c.count : c.count);
  std::vector<Bytes> inputs;
  for (int r = 0; r < p; ++r) inputs.push_back(random_elements(c.dt, c.op, in_n, case_id * 131 + r));

  Bytes out(std::max<std::size_t>(out_n, 1) * esz + 64, 0xEE);
  Bytes in = inputs[me];
  const void* send = in.data();
  void* recv = out.data();
  if (c.in_place) {
    // The in-place layouts of the NCCL API.
    if (c.kind == CollectiveKind::allgather) {
      if (c.count) std::memcpy(out.data() + me * c.count * esz, in.data(), c.count * esz);
      send = out.data() + me * c.count * esz;
    } else if (scatter) {
      out = in;
      out.resize(in_n * esz + 64);
      send = out.data();
      recv = out.data() + me * c.count * esz;
    } else if (c.kind == CollectiveKind::allreduce || me == c.root) {
      if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
      send = recv = out.data();
    }
  }
  // The whole of both buffers, so that a stray access by the staging shows in the tail.
  struct Emulated {
    const void* p = nullptr;
    Emulated(const void* b, std::size_t n, Memory m) {
      if (m == Memory::emulated_device && n) device::emulate(p = b, n);
    }
    ~Emulated() { release(); }
    void release() {
      if (p) device::forget(p);
      p = nullptr;
    }
  } dev_in(in.data(), in.size(), memory), dev_out(out.data(), out.size(), memory);
  switch (c.kind) {
    case CollectiveKind::allreduce: comm.allreduce(send, recv, c.count, c.dt, c.op, o).wait(); break;
    case CollectiveKind::reduce_scatter: comm.reduce_scatter(send, recv, c.count, c.dt, c.op, o).wait(); break;
    case CollectiveKind::allgather: comm.allgather(send, recv, c.count, c.dt, o).wait(); break;
    case CollectiveKind::broadcast: comm.broadcast(send, recv, c.count, c.dt, c.root, o).wait(); break;
    case CollectiveKind::reduce: comm.reduce(send, recv, c.count, c.dt, c.op, c.root, o).wait(); break;
    default: break;
  }

  dev_in.release();  // the checks below are host code
  dev_out.release();
  std::size_t bad = 0;
  if (c.kind == CollectiveKind::allgather) {
    for (int r = 0; r < p && c.count; ++r)
      bad += std::memcmp(static_cast<char*>(recv) + r * c.count * esz, inputs[r].data(), c.count * esz) != 0;
  } else if (c.kind == CollectiveKind::broadcast) {
    if (c.count) bad += std::memcmp(recv, inputs[c.root].data(), c.count * esz) != 0;
  } else if (c.kind != CollectiveKind::reduce || me == c.root) {
    const auto e = reference(c.dt, c.op, inputs, in_n);
    bad = mismatches(c.dt, c.op, recv, e, scatter ? me * c.count : 0, out_n, p);
  }
  // Nothing past the output may be touched.
  const auto* tail = static_cast<const unsigned char*>(recv) + out_n * esz;
  const auto* end = out.data() + out.size();
  if (!c.in_place || !scatter)
    for (const auto* q = tail; q < end && q < tail + 64; ++q) bad += *q != 0xEE;

  // Bitwise identity across ranks for results every rank holds.
  if (c.kind == CollectiveKind::allreduce || c.kind == CollectiveKind::allgather ||
      c.kind == CollectiveKind::broadcast) {
    std::int64_t h = static_cast<std::int64_t>(hash_bytes(recv, out_n * esz));
    std::vector<std::int64_t> all(p);
    comm.allgather(&h, all.data(), 1, DataType::i64).wait();
    for (int r = 0; r < p; ++r)
      if (all[r] != h) return c.name() + ": rank " + std::to_string(r) + " holds different bits";
  }
  return bad ? c.name() + ": " + std::to_string(bad) + " wrong" : "";
}

void p2p_and_barrier(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{(1u << 20) + 3}}) {
    const auto mine = random_elements(DataType::u8, ReduceOp::sum, n, 7000 + me);
    const auto want = random_elements(DataType::u8, ReduceOp::sum, n, 7000 + (me + p - 1) % p);
    Bytes got(n);
    // Posting the receive after the send must not deadlock either.
    auto s = comm.send(mine.data(), n, DataType::u8, (me + 1) % p);
    auto r = comm.recv(got.data(), n, DataType::u8, (me + p - 1) % p);
    s.wait();
    r.wait();
    require(got == want, "send/recv of " + std::to_string(n) + " bytes corrupted");
  }
  check_any_source(comm);
  check_barrier(comm);
}

void check_any_source(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  if (p == 1) return;
  for (std::size_t n : {std::size_t{0}, std::size_t{1003}}) {
    for (int root = 0; root < p; ++root) {
      const auto payload = [&](int from, int k) {
        return random_elements(DataType::u8, ReduceOp::sum, n, 9000 + 100 * from + 10 * k + root);
      };
      if (me != root) {
        for (int k = 0; k < 2; ++k) comm.send(payload(me, k).data(), n, DataType::u8, root).wait();
        continue;
      }
      // A receive from a named peer issued while one from any source is unmatched takes
      // that peer's next message after it: each sender's two arrive in order either way.
      const int named = (root + 1) % p;
      std::vector<Bytes> got(2 * static_cast<std::size_t>(p - 1), Bytes(n));
      std::vector<int> from(got.size(), -1);
      auto first = comm.recv_any(got[0].data(), n, DataType::u8, &from[0]);
      auto second = comm.recv(got[1].data(), n, DataType::u8, named);
      from[1] = named;
      first.wait();
      second.wait();
      for (std::size_t i = 2; i < got.size(); ++i) comm.recv_any(got[i].data(), n, DataType::u8, &from[i]).wait();
      std::vector<int> next(static_cast<std::size_t>(p), 0);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const int s = from[i];
        require(s >= 0 && s < p && s != root, "recv_any: source " + std::to_string(s) + " on root " +
                                                 std::to_string(root));
        const int k = next[static_cast<std::size_t>(s)]++;
        require(k < 2 && got[i] == payload(s, k), "recv_any of " + std::to_string(n) + " bytes: message " +
                                                      std::to_string(i) + " from rank " + std::to_string(s) +
                                                      " is not its message " + std::to_string(k));
      }
    }
    comm.barrier().wait();
  }
}

void check_barrier(Communicator& comm, const CallOptions& o) {
  // One late rank per round (each rank in turn, up to 4 rounds): nobody may leave the
  // barrier before it entered. CLOCK_MONOTONIC is one clock for all processes here.
  const int p = comm.size(), me = comm.rank();
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (int round = 0; round < std::min(p, 4); ++round) {
    const int late = (round * 5 + 1) % p;
    if (me == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::int64_t times[2];
    times[0] = now_ns();
    comm.barrier(o).wait();
    times[1] = now_ns();
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(p));
    comm.allgather(times, all.data(), 2, DataType::i64).wait();
    const std::int64_t entered = all[2 * static_cast<std::size_t>(late)];
    for (int r = 0; r < p; ++r)
      require(all[2 * static_cast<std::size_t>(r) + 1] >= entered,
              "barrier round " + std::to_string(round) + ": rank " + std::to_string(r) + " left " +
                  std::to_string((entered - all[2 * static_cast<std::size_t>(r) + 1]) / 1000) +
                  " us before rank " + std::to_string(late) + " entered");
  }
}


std::vector<Case> allreduce_cases(int p, bool large) {
  std::vector<Case> out;
  for (const auto& c : cases(p, large))
    if (c.kind == CollectiveKind::allreduce) out.push_back(c);
  return out;
}

void run_all(Communicator& comm, const std::vector<Case>& all, const CallOptions& o, Memory memory) {
  std::string failures;
  int failed = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string f = run_case(comm, all[i], i, o, memory);
    if (!f.empty() && ++failed <= 10) failures += "\n  " + f;
  }
  require(failed == 0, std::to_string(failed) + " of " + std::to_string(all.size()) +
                           " cases failed:" + failures);
}

}  // namespace strata::test
