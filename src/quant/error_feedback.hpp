// Error feedback: what lossy compression did not deliver is kept and added to the next
// step's input, so over many steps every gradient component is eventually sent (the
// property that makes biased compressors such as top-k converge like plain SGD).
//
// Usage per step and shard:
//   ef.compensate(key, shard, data);        // data += residual
//   codec.encode(data, wire);  codec.decode(wire, decoded);
//   ef.update(key, shard, data, decoded);   // residual = data - decoded
//   ef.add(key, shard, at, dropped);        // residual[at..] += what a later stage dropped
//
// Residuals are keyed by (tensor key, shard offset, shard length). The shards of one key
// must not overlap: a shard that overlaps a stored one without matching it exactly means
// the layout changed (another world size, another bucket plan), and update() refuses it
// until reset(key) drops the stale residuals. A NaN or infinity that reaches a residual
// stays there until reset.
//
// Thread-safety: none. One store per communicator, used from that communicator's engine
// thread only (training code reaches it through the communicator, not directly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/feedback_store.hpp"

namespace strata::quant {

struct Shard {
  std::uint64_t offset = 0;  // first element within the tensor
  std::uint64_t length = 0;  // elements
  bool operator==(const Shard&) const = default;
};

// The checksum that ends a snapshot (ErrorFeedback::save), over its first n bytes.
std::uint64_t snapshot_checksum(const std::byte* p, std::size_t n);

class ErrorFeedback : public collectives::FeedbackStore {
 public:
  // data += the stored residual of (key, shard), if there is one. data.size() must equal
  // shard.length. Throws InvalidArgument (data untouched) on a size mismatch or a shard
  // that overlaps a stored one of the same key without matching it.
  void compensate(std::string_view key, Shard shard, std::span<float> data) const;

  // Stores residual = sent - decoded, where sent is what was encoded (input plus the old
  // residual) and decoded what decoding the encoding reproduces. Same checks as compensate;
  // on a throw the store is unchanged.
  void update(std::string_view key, Shard shard, std::span<const float> sent,
              std::span<const float> decoded);

  // The same for a top-k encoding, given its kept elements (decode_sparse): the residual
  // is `sent` with the delivered values subtracted at `idx`, without a dense decode.
  void update_sparse(std::string_view key, Shard shard, std::span<const float> sent,
                     std::span<const std::uint32_t> idx, std::span<const float> values);

  // residual[at, at + dropped.size()) of (key, shard) += dropped: what a later stage of
  // the same call dropped from a range this rank re-encoded for everyone (the owner's
  // re-sparsification in compressed_allreduce). Makes a zero residual first if there is
  // none. Same checks as compensate; the range must lie in the shard.
  void add(std::string_view key, Shard shard, std::size_t at, std::span<const float> dropped);

  void reset(std::string_view key);
  void reset_all();

  // The stored residual, empty if none.
  std::span<const float> residual(std::string_view key, Shard shard) const;
  std::size_t entries() const;
  std::size_t residual_elements() const;

  // A versioned, checksummed snapshot for training checkpoints. restore() replaces the
  // whole store, or throws InvalidArgument naming the problem and changes nothing.
  std::vector<std::byte> save() const;
  void restore(std::span<const std::byte> bytes);

 private:
  using Shards = std::map<std::uint64_t, std::vector<float>>;  // offset -> residual
  std::map<std::string, Shards, std::less<>> store_;
};

}  // namespace strata::quant
