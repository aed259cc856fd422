// Layout of the 40 significant tag bits. Collectives and point-to-point traffic live in
// separate spaces so a send/recv pair can never match a collective's message.
//
//   bit 39      space (0 collective, 1 point-to-point)
//   bits 8..38  sequence number (collectives: the communicator's; p2p: per peer pair)
//   bits 0..7   channel within one operation
#pragma once

#include <cstdint>

#include "transport/transport.hpp"

namespace strata::transport {

enum class Channel : std::uint8_t {
  fingerprint = 0,  // the cross-rank consistency check
  data = 1,         // an algorithm's main stream
  data2 = 2,        // a second stream (e.g. a second tree, or a flag exchange)
  result = 3,       // results fanned back out (e.g. to ranks folded out of a power of two)
  tune = 4,         // the online tuner's agreement after a call (topology/tuner.hpp)
  // exchange's own streams (collectives/exchange.cpp): it sends to every rank in its first
  // round, so a rank that called another collective must not take those messages as its own
  exchange = 5,
  exchange_stamp = 6,
  // shared_memory's notices that a slot of the host's segment may be read or refilled
  // (collectives/shared_memory.cpp): taken for another algorithm's data, they would let
  // a rank read a slot its owner has not filled
  shared_memory = 7,
  // every rank's word to a broadcast's or reduce's root that it passed its fingerprint
  // check (core/comm_impl.cpp)
  confirm = 8,
  // a group's NCCL unique id, from its first member to the others, when the group's NCCL
  // communicator is made (hierarchy/nccl_engine.cpp)
  nccl_id = 9,
  stage0 = 16,      // first of kStageChannels: one per pipeline segment in flight
};

// A pipelined plan runs several segments' stages at once between the same peers; each
// gets its own channel so their messages cannot match each other's receives.
inline constexpr int kStageChannels = 256 - static_cast<int>(Channel::stage0);
inline Channel stage_channel(std::size_t segment) {
  return static_cast<Channel>(static_cast<std::size_t>(Channel::stage0) + segment % kStageChannels);
}

inline constexpr std::uint64_t kSeqMask = (1ull << 31) - 1;

inline Tag collective_tag(std::uint64_t seq, Channel ch) {
  return ((seq & kSeqMask) << 8) | static_cast<std::uint8_t>(ch);
}

inline Tag p2p_tag(std::uint64_t seq) { return (1ull << 39) | ((seq & kSeqMask) << 8); }

// Streams between a worker and a dedicated parameter server (collectives/ps_protocol.hpp): the
// point-to-point space at its last sequence number. User send/recv never addresses a
// server, so these cannot meet a user message; the reserved number keeps them apart
// from the worker-to-worker p2p tags in traces as well.
inline Tag server_tag(std::uint8_t stream) { return (1ull << 39) | (kSeqMask << 8) | stream; }

static_assert(kTagBits == 40, "tag layout assumes 40 significant bits");

}  // namespace strata::transport
