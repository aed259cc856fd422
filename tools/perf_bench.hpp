// One strata-perf measurement: a collective at one size, out-of-place then in-place, timed
// the way nccl-tests times it and checked with perf_data's patterns. Every rank calls the
// same sequence; the returned row holds the slowest rank's time, everyone's #wrong and,
// when the ranks span regions, the WAN bytes each rank sent per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "perf_options.hpp"
#include "perf_report.hpp"
#include "strata/communicator.hpp"

namespace strata::perf {

class Pattern;

struct Case {
  Collective collective = Collective::all_reduce;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;  // ignored unless reduces(collective)
  int root = 0;                 // ignored unless rooted(collective)
  std::string algorithm;        // CallOptions::algorithm of the timed calls; "" automatic
};

class Bench {
 public:
  // Buffers are allocated once, for options.max_bytes.
  Bench(Communicator& comm, const PerfOptions& options);

  // Collective over comm: every rank must call it with the same arguments.
  ResultRow run(const Case& c, std::uint64_t size_bytes);

 private:
  // Element counts and pointers for one group, following nccl-tests' getCollByteCount.
  struct Shape {
    std::size_t param = 0;      // the count passed to the call
    std::size_t send = 0;       // elements read from send
    std::size_t recv = 0;       // elements written to recv
    std::uint64_t bytes = 0;    // the size column: max(send, recv) bytes
  };
  struct Buffers {
    const void* send;
    void* recv;
  };
  // This rank's WAN bytes over a timed loop.
  struct WanDelta {
    std::uint64_t payload = 0;
    std::uint64_t wire = 0;
  };

  Shape shape(const Case& c, std::uint64_t size_bytes) const;
  Buffers buffers(const Case& c, const Shape& s, bool in_place) const;
  // Enqueues one operation (two for sendrecv), appending its Works to `pending`.
  void issue(const Case& c, const Shape& s, const Buffers& b, std::vector<Work>& pending);
  // Fills the inputs of one group with p's values and poisons its outputs.
  void prepare(const Case& c, const Shape& s, bool in_place, const Pattern& p);
  double time_group(const Case& c, const Shape& s, bool in_place, WanDelta& wan);
  // Every rank's WAN delta, gathered; per call and over ranks.
  WanBytes gather_wan(const WanDelta& mine, int calls);
  std::int64_t check_group(const Case& c, const Shape& s, bool in_place);
  // --compress: the relative error of one compressed call against the exact sum.
  double compressed_error(const Case& c, const Shape& s, bool in_place);

  Communicator& comm_;
  const PerfOptions& opts_;
  // The bench's own calls: a group's opening barrier, its slowest rank's time, its count of
  // wrong elements. They name an algorithm; left automatic they would share the online
  // tuner's buckets with the timed calls (an 8-byte f64 max is an 8-byte allreduce) and be
  // tried and counted among them, between groups rather than in a loop.
  CallOptions own_reduce_, own_barrier_;
  bool spans_regions_ = false;
  std::unique_ptr<std::byte, void (*)(void*)> send_;
  std::unique_ptr<std::byte, void (*)(void*)> recv_;
};

}  // namespace strata::perf
