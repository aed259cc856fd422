#include "perf_bench.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "perf_data.hpp"

namespace strata::perf {

namespace {

using Clock = std::chrono::steady_clock;

// Gradient-like data for --compress: the check patterns are small integers whose many
// ties would make top-k selection look slower (and its error larger) than on real
// gradients. A hash of (rank, index) gives each element a value in [-1, 1) that every
// rank can recompute, so the exact sum stays known locally.
float noise(int rank, std::size_t i) {
  std::uint64_t z = (static_cast<std::uint64_t>(rank) << 40) ^ i ^ 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) / static_cast<float>(1u << 24);  // [0, 1)
  // Cubed: a heavy-tailed spread, as gradients have, instead of a flat one.
  const float v = 2.0f * u - 1.0f;
  return v * v * v;
}

void fill_noise(void* buf, std::size_t count, int rank) {
  auto* f = static_cast<float*>(buf);
  for (std::size_t i = 0; i < count; ++i) f[i] = noise(rank, i);
}

// Page-aligned so that buffer placement does not vary between sizes or runs.
std::unique_ptr<std::byte, void (*)(void*)> allocate(std::uint64_t bytes) {
  constexpr std::size_t kAlign = 4096;
  const std::size_t n = std::max<std::size_t>((static_cast<std::size_t>(bytes) + kAlign - 1) / kAlign * kAlign, kAlign);
  void* p = std::aligned_alloc(kAlign, n);
  if (p == nullptr) throw std::bad_alloc();
  // Fault the pages in now rather than inside the first timed iteration.
  std::memset(p, 0, n);
  return {static_cast<std::byte*>(p), std::free};
}

void wait_all(std::vector<Work>& works) {
  for (auto& w : works) w.wait();
  works.clear();
}

}  // namespace

Bench::Bench(Communicator& comm, const PerfOptions& options)
    : comm_(comm), opts_(options), send_(allocate(options.max_bytes)), recv_(allocate(options.max_bytes)) {
  // Localities are the same on every rank, so all agree whether to gather WAN figures.
  for (int r = 1; r < comm_.size(); ++r)
    spans_regions_ = spans_regions_ || comm_.locality(r).region != comm_.locality(0).region;
  // One round where the communicator has it; any registered one else. Every rank lists the same.
  auto own = [&](CollectiveKind kind) {
    const auto names = comm_.algorithms(kind, DataType::f64);
    if (std::find(names.begin(), names.end(), "exchange") != names.end()) return std::string("exchange");
    return names.empty() ? std::string() : names.front();
  };
  own_reduce_.algorithm = own(CollectiveKind::allreduce);
  own_barrier_.algorithm = own(CollectiveKind::barrier);
}

Bench::Shape Bench::shape(const Case& c, std::uint64_t size_bytes) const {
  const std::size_t ts = dtype_size(c.dtype);
  const auto n = static_cast<std::size_t>(comm_.size());
  const auto count = static_cast<std::size_t>(size_bytes / ts);
  Shape s;
  switch (c.collective) {
    case Collective::reduce_scatter:
      s.param = s.recv = count / n;
      s.send = s.param * n;
      break;
    case Collective::all_gather:
      s.param = s.send = count / n;
      s.recv = s.param * n;
      break;
    case Collective::alltoall:  // size is each rank's whole buffer, as in nccl-tests
      s.param = count / n;
      s.send = s.recv = s.param * n;
      break;
    case Collective::barrier:  // moves nothing: one row, whatever the sizes asked
      break;
    default:
      s.param = s.send = s.recv = count;
      break;
  }
  s.bytes = static_cast<std::uint64_t>(std::max(s.send, s.recv) * ts);
  return s;
}

// In place follows NCCL: the whole vector lives in recv, and for reduce_scatter and
// all_gather the rank's own block sits at offset rank * count within it.
Bench::Buffers Bench::buffers(const Case& c, const Shape& s, bool in_place) const {
  if (!in_place) return {send_.get(), recv_.get()};
  std::byte* base = recv_.get();
  const std::size_t own = static_cast<std::size_t>(comm_.rank()) * s.param * dtype_size(c.dtype);
  switch (c.collective) {
    case Collective::reduce_scatter: return {base, base + own};
    case Collective::all_gather: return {base + own, base};
    default: return {base, base};
  }
}

void Bench::issue(const Case& c, const Shape& s, const Buffers& b, std::vector<Work>& pending) {
  CallOptions o;
  o.algorithm = c.algorithm;  // --algo; the bench's own barriers and reductions stay automatic
  switch (c.collective) {
    case Collective::all_reduce:
      if (opts_.compress) {
        o.compression = opts_.compress;
        // One residual per size: each size shards the vector differently.
        o.compression->key += ":" + std::to_string(s.param);
      }
      pending.push_back(comm_.allreduce(b.send, b.recv, s.param, c.dtype, c.op, o));
      break;
    case Collective::reduce_scatter:
      pending.push_back(comm_.reduce_scatter(b.send, b.recv, s.param, c.dtype, c.op, o));
      break;
    case Collective::all_gather:
      pending.push_back(comm_.allgather(b.send, b.recv, s.param, c.dtype, o));
      break;
    case Collective::broadcast:
      pending.push_back(comm_.broadcast(b.send, b.recv, s.param, c.dtype, c.root, o));
      break;
    case Collective::reduce:
      pending.push_back(comm_.reduce(b.send, b.recv, s.param, c.dtype, c.op, c.root, o));
      break;
    case Collective::sendrecv: {
      // Ring neighbours, as nccl-tests' sendrecv: everyone sends right and receives left.
      const int n = comm_.size(), me = comm_.rank();
      pending.push_back(comm_.recv(b.recv, s.param, c.dtype, (me + n - 1) % n));
      pending.push_back(comm_.send(b.send, s.param, c.dtype, (me + 1) % n));
      break;
    }
    case Collective::alltoall:
      pending.push_back(comm_.alltoall(b.send, b.recv, s.param, c.dtype));
      break;
    case Collective::barrier:
      pending.push_back(comm_.barrier(o));
      break;
  }
}

void Bench::prepare(const Case& c, const Shape& s, bool in_place, const Pattern& p) {
  const std::size_t ts = dtype_size(c.dtype);
  const int me = comm_.rank();
  std::byte* send = send_.get();
  std::byte* recv = recv_.get();
  // Output bytes start as 0xff: NaN for floats and unlikely for integers, so an element
  // the collective forgot to write shows up as wrong.
  auto poison = [&](std::byte* where, std::size_t elems) { std::memset(where, 0xff, elems * ts); };
  switch (c.collective) {
    case Collective::all_reduce:
      if (opts_.compress) {
        fill_noise(in_place ? recv : send, s.send, me);
        if (!in_place) poison(recv, s.recv);
        break;
      }
      [[fallthrough]];
    case Collective::reduce:
    case Collective::sendrecv:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      fill(in_place ? recv : send, c.dtype, s.send, p, me, 0);
      if (!in_place) poison(recv, s.recv);
      break;
    case Collective::all_gather:
      poison(recv, s.recv);
      fill(in_place ? recv + static_cast<std::size_t>(me) * s.param * ts : send, c.dtype, s.send, p, me, 0);
      break;
    case Collective::broadcast:
      if (!in_place || me != c.root) poison(recv, s.recv);
      if (me == c.root) fill(in_place ? recv : send, c.dtype, s.send, p, me, 0);
      break;
    case Collective::barrier:
      break;
  }
}

double Bench::time_group(const Case& c, const Shape& s, bool in_place, WanDelta& wan) {
  const Buffers b = buffers(c, s, in_place);
  prepare(c, s, in_place, Pattern(comm_.size(), c.op, 0));
  std::vector<Work> pending;
  pending.reserve(static_cast<std::size_t>(opts_.iters) * 2);
  comm_.barrier(own_barrier_).wait();
  // Local loads only: reading the counters adds nothing to the timed loop. With -z 1 the
  // loop's barriers are counted too (a few bytes per call).
  const TrafficStats t0 = comm_.traffic();
  const auto start = Clock::now();
  std::vector<double> each;
  for (int it = 0; it < opts_.iters; ++it) {
    const auto t = Clock::now();
    issue(c, s, b, pending);
    if (opts_.blocking != 0 || opts_.median) {
      wait_all(pending);
      each.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      if (opts_.blocking == 1) comm_.barrier(own_barrier_).wait();
    }
  }
  wait_all(pending);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / opts_.iters;
  if (opts_.median && !each.empty()) {
    std::sort(each.begin(), each.end());
    const std::size_t m = each.size();
    us = m % 2 ? each[m / 2] : (each[m / 2 - 1] + each[m / 2]) / 2;
  }
  const TrafficStats t1 = comm_.traffic();
  wan.payload += t1.wan_bytes_sent - t0.wan_bytes_sent;
  wan.wire += t1.wan_wire_bytes_sent - t0.wan_wire_bytes_sent;
  // The row reports the slowest rank.
  comm_.allreduce(&us, &us, 1, DataType::f64, ReduceOp::max, own_reduce_).wait();
  return us;
}

std::int64_t Bench::check_group(const Case& c, const Shape& s, bool in_place) {
  const Buffers b = buffers(c, s, in_place);
  const int me = comm_.rank(), n = comm_.size();
  std::int64_t wrong = 0;
  for (int k = 0; k < opts_.check; ++k) {
    const Pattern p(n, reduces(c.collective) ? c.op : ReduceOp::sum, 1 + k * 7919);
    prepare(c, s, in_place, p);
    std::vector<Work> pending;
    issue(c, s, b, pending);
    wait_all(pending);
    Expect e;
    switch (c.collective) {
      case Collective::all_reduce:
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::reduce:
        if (me == c.root) wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::reduce_scatter:
        e.first = static_cast<std::size_t>(me) * s.param;
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::all_gather:
        e.kind = Expect::Kind::gathered;
        e.block = s.param;
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::broadcast:
        e.kind = Expect::Kind::from_rank;
        e.rank = c.root;
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::sendrecv:
        e.kind = Expect::Kind::from_rank;
        e.rank = (me + n - 1) % n;
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::alltoall:
        e.kind = Expect::Kind::exchanged;
        e.block = s.param;
        e.first = static_cast<std::size_t>(me) * s.param;
        wrong += count_wrong(b.recv, c.dtype, s.recv, p, e);
        break;
      case Collective::barrier:  // its ordering is tested (collective_check.hpp), not its data
        break;
    }
  }
  comm_.allreduce(&wrong, &wrong, 1, DataType::i64, ReduceOp::sum, own_reduce_).wait();
  return wrong;
}

double Bench::compressed_error(const Case& c, const Shape& s, bool in_place) {
  const Buffers b = buffers(c, s, in_place);
  const int n = comm_.size();
  prepare(c, s, in_place, Pattern(n, c.op, 1));
  // The codec's error on one call: feedback would add residuals of the timed calls.
  CallOptions o;
  o.compression = opts_.compress;
  o.compression->error_feedback = false;
  comm_.allreduce(b.send, b.recv, s.param, c.dtype, c.op, o).wait();
  const auto* got = static_cast<const float*>(b.recv);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < s.recv; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += noise(r, i);
    if (c.op == ReduceOp::avg) want /= n;
    err += (got[i] - want) * (got[i] - want);
    norm += want * want;
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

WanBytes Bench::gather_wan(const WanDelta& mine, int calls) {
  const auto n = static_cast<std::size_t>(comm_.size());
  const std::uint64_t send[2] = {mine.payload, mine.wire};
  std::vector<std::uint64_t> all(2 * n);
  // i64 only names the element size: an allgather copies bits and never reduces them.
  comm_.allgather(send, all.data(), 2, DataType::i64).wait();
  WanBytes w;
  for (std::size_t r = 0; r < n; ++r) {
    const double payload = static_cast<double>(all[2 * r]) / calls;
    w.mean += payload / static_cast<double>(n);
    w.max = std::max(w.max, payload);
    w.wire_mean += static_cast<double>(all[2 * r + 1]) / calls / static_cast<double>(n);
  }
  return w;
}

ResultRow Bench::run(const Case& c, std::uint64_t size_bytes) {
  const Shape s = shape(c, size_bytes);
  {
    const Buffers b = buffers(c, s, false);
    std::vector<Work> pending;
    for (int it = 0; it < opts_.warmup_iters; ++it) issue(c, s, b, pending);
    wait_all(pending);
  }
  ResultRow row;
  row.size = s.bytes;
  row.count = s.param;
  row.type = nccl_type_name(c.dtype);
  row.redop = reduces(c.collective) ? to_string(c.op) : "none";
  row.root = rooted(c.collective) ? c.root : -1;
  row.algorithm = c.algorithm;
  const double factor = bus_bw_factor(collective_name(c.collective), comm_.size()).value_or(1.0);
  WanDelta wan;
  for (const bool in_place : {false, true}) {
    const double us = time_group(c, s, in_place, wan);
    // strata's send and recv do not define a result when their buffers alias, so an
    // in-place sendrecv is timed (as nccl-tests does) but has nothing to check: N/A.
    const bool checkable = !(in_place && c.collective == Collective::sendrecv);
    std::optional<std::int64_t> wrong;
    if (opts_.check > 0 && opts_.compress) {
      const double e = compressed_error(c, s, in_place);
      row.rel_error = std::max(row.rel_error.value_or(0.0), e);
    } else if (opts_.check > 0 && checkable) {
      wrong = check_group(c, s, in_place);
    }
    (in_place ? row.in_place : row.out_of_place) = make_timing(us, s.bytes, factor, wrong);
  }
  // After both groups are timed, so the gather's own traffic is in neither.
  if (spans_regions_) row.wan = gather_wan(wan, 2 * opts_.iters);
  return row;
}

}  // namespace strata::perf
