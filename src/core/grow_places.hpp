// Who takes which new place when a communicator grows (Communicator::grow and join): the
// joiners claim the places old_size .. new_size-1 and show that they live while the
// others gather, so that a joiner that dies before the rendezvous is named within seconds
// and its place goes to a replacement of the same generation, instead of costing every
// rank the whole timeout.
//
// Only the Store's set, get and add are used (any store a grow meets in will do: strata's,
// or a framework's): each place has an epoch; a joiner owns a place in an epoch by being
// the first to add to its claim counter, and adds to its beat counter while it waits. Rank
// 0 of the growing communicator watches the beats, starts a new epoch for a place whose
// joiner fell silent, and once every place has a live joiner publishes "go" with the
// epochs; a joiner whose epoch is not the one in "go" lost its place and claims again.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "strata/store.hpp"

namespace strata::detail {

class GrowPlaces {
 public:
  using Clock = Store::Clock;
  // store: the generation's (grow/<generation>/); the places are old_size .. new_size-1.
  GrowPlaces(Store& store, int old_size, int new_size);

  // A joiner: a place (the one given, or the first free one), held until "go" names it.
  // Throws TimeoutError when none is free by the deadline, InvalidArgument for a place
  // out of range.
  int join(int wanted, Clock::time_point deadline);
  // Rank 0 of the growing communicator: returns once every place has a live joiner.
  void decide(Clock::time_point deadline);
  // The other ranks of the growing communicator.
  void await(Clock::time_point deadline);

 private:
  struct Claim {
    int place;
    std::int64_t epoch;
  };
  bool try_claim(int place, Claim& out);
  std::int64_t epoch(int place);
  std::string key(int place, const char* what, std::int64_t epoch) const;

  Store& store_;
  int old_size_, new_size_;
};

}  // namespace strata::detail
