// The region level of a device call: the host engine's work on a page-locked copy of the
// level's range. Each stage in flight takes a staging slot of its own and waits for its
// copies through markers (transport requests whose done() asks the copy stream), so the
// pipeline's stages overlap their copies with each other's transfers.
#include <stdexcept>
#include <vector>

#include "collectives/patterns.hpp"
#include "hierarchy/device_engines.hpp"

namespace strata::hierarchy {

using collectives::Channel;
using collectives::CollArgs;
using collectives::Context;
using collectives::Group;
using collectives::Steps;

namespace {

class MarkerRequest final : public transport::Request {
 public:
  MarkerRequest(int rank, std::shared_ptr<device::Marker> m) : Request(rank), marker_(std::move(m)) {}
  bool done() const override { return marker_->done(); }
  const std::string& error() const override { return none_; }
  std::size_t bytes() const override { return 0; }

 private:
  std::shared_ptr<device::Marker> marker_;
  std::string none_;
};

class StagedEngine final : public LevelEngine {
 public:
  explicit StagedEngine(device::CopyStream& copies) : copies_(copies) {
    // Slots 0 and 1 stage whole calls (core/device_call.cpp).
    for (int s = device::CopyStream::kStagingSlots - 1; s >= 2; --s) free_.push_back(s);
  }
  const char* name() const override { return "staged"; }
  std::size_t stages_at_once() const override { return device::CopyStream::kStagingSlots - 2; }

  // A broadcast (split rail's across regions, along the root's rail): the root's range
  // in, the host's broadcast, the result back. Device plans run no other whole collective
  // on a level: they take no latency path for the reducing ones.
  Steps collective(Context& ctx, const Group& g, const CollArgs& a) const override {
    if (a.kind != CollectiveKind::broadcast)
      throw std::logic_error(std::string("the staged engine runs no whole ") + to_string(a.kind));
    const std::size_t bytes = a.count * dtype_size(a.dtype);
    Slot slot(*this, bytes);
    if (g.me == a.root) {
      copies_.to_host(slot.host, a.send, bytes);
      co_await copied(ctx);
    }
    const CollArgs h{CollectiveKind::broadcast, slot.host, slot.host, a.count, a.dtype, a.op, a.root, {}};
    co_await host_engine().collective(ctx, g, h);
    if (g.me != a.root || a.send != a.recv) copies_.to_device(a.recv, slot.host, bytes);
    co_await copied(ctx);
  }

  Steps reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv, std::size_t n, DataType dt,
                              ReduceOp op) const override {
    const std::size_t esz = dtype_size(dt);
    Slot slot(*this, n * esz);
    copies_.to_host(slot.host, send, n * esz);
    co_await copied(ctx);
    co_await host_engine().reduce_scatter_pieces(ctx, g, slot.host, slot.host, n, dt, op);
    const auto [b, len] = piece(g, n, esz);
    copies_.to_device(static_cast<char*>(recv) + b, slot.host + b, len);
    co_await copied(ctx);
  }

  Steps allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt) const override {
    const std::size_t esz = dtype_size(dt);
    Slot slot(*this, n * esz);
    const auto [b, len] = piece(g, n, esz);
    copies_.to_host(slot.host + b, static_cast<char*>(buf) + b, len);
    co_await copied(ctx);
    co_await host_engine().allgather_pieces(ctx, g, slot.host, n, dt);
    copies_.to_device(buf, slot.host, n * esz);
    co_await copied(ctx);
  }

  Steps allreduce_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt, ReduceOp op,
                         Channel ch, int avg_divisor) const override {
    const std::size_t bytes = n * dtype_size(dt);
    Slot slot(*this, bytes);
    copies_.to_host(slot.host, buf, bytes);
    co_await copied(ctx);
    co_await host_engine().allreduce_pieces(ctx, g, slot.host, n, dt, op, ch, avg_divisor);
    copies_.to_device(buf, slot.host, bytes);
    co_await copied(ctx);
  }

  Steps scatter_pieces(Context& ctx, const Group& g, const char* src, char* out, std::size_t n, DataType dt,
                       int from) const override {
    const std::size_t esz = dtype_size(dt);
    Slot slot(*this, n * esz);
    if (g.me == from) {
      copies_.to_host(slot.host, src, n * esz);
      co_await copied(ctx);
    }
    co_await host_engine().scatter_pieces(ctx, g, slot.host, slot.host, n, dt, from);
    const auto [b, len] = piece(g, n, esz);
    copies_.to_device(out + b, slot.host + b, len);
    co_await copied(ctx);
  }

 private:
  // A staging slot for one stage, back in the free list when the stage ends (its last
  // copy is done by then).
  struct Slot {
    Slot(const StagedEngine& e, std::size_t bytes) : engine(e) {
      if (e.free_.empty()) throw std::logic_error("more stages in flight than staging slots");
      index = e.free_.back();
      e.free_.pop_back();
      host = static_cast<char*>(e.copies_.staging(index, bytes));
    }
    ~Slot() { engine.free_.push_back(index); }
    const StagedEngine& engine;
    int index;
    char* host;
  };

  static std::pair<std::size_t, std::size_t> piece(const Group& g, std::size_t n, std::size_t esz) {
    const auto parts = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
    return {collectives::piece_begin(n, parts, me) * esz, collectives::piece_size(n, parts, me) * esz};
  }
  collectives::WaitFor copied(Context& ctx) const {
    return ctx.wait(std::make_shared<MarkerRequest>(ctx.my_rank(), copies_.mark()));
  }

  device::CopyStream& copies_;
  mutable std::vector<int> free_;  // engine thread only
};

}  // namespace

std::unique_ptr<LevelEngine> staged_engine(device::CopyStream& copies) {
  return std::make_unique<StagedEngine>(copies);
}

}  // namespace strata::hierarchy
