// Options for creating a communicator and for individual calls.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "strata/compression.hpp"
#include "strata/store.hpp"

namespace strata {

enum class TransportKind { automatic, ucx, tcp };

const char* to_string(TransportKind k);

struct CommOptions {
  // automatic: STRATA_TRANSPORT, else UCX.
  TransportKind transport = TransportKind::automatic;
  // Zero means STRATA_TIMEOUT_S. Applies to bootstrap and to every collective.
  std::chrono::milliseconds timeout{0};
  // The tie-breaker of shrink(): a store outside every rank (strata-store, torch's) that
  // names which half goes on when a shrink leaves exactly half of the ranks. Unset:
  // STRATA_ARBITER (a strata-store's host:port), else none, and an even split stops both
  // halves. Kept by the communicator and the ones shrunk from it.
  std::shared_ptr<Store> arbiter;
};

struct CallOptions {
  // Zero means the communicator's timeout.
  std::chrono::milliseconds timeout{0};
  // allreduce only (f32, sum or avg). Unset means STRATA_COMPRESS (default: none); every
  // rank must ask for the same compression, or the call fails with MismatchError.
  std::optional<Compression> compression;
  // A registered flat algorithm by name ("ring", "halving_doubling", "double_tree",
  // "direct", ...; see the README); empty: chosen automatically. It must implement the
  // collective, else the call fails with InvalidArgument listing the valid names. It
  // applies where the communicator runs flat (one region, or STRATA_ALGO=flat); every
  // rank must name the same one.
  std::string algorithm;
  // For buffers in CUDA device memory (found from the pointers, as NCCL's users pass
  // them): the cudaStream_t the call is ordered on, null for the default stream. The call
  // reads its input after the work enqueued on the stream before it, and work enqueued
  // after it waits, on the device, for its results; the Work completes at the same point.
  // Ignored for host buffers. One call's buffers are all host or all on one device.
  void* stream = nullptr;
};

}  // namespace strata
