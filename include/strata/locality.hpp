// Where a rank runs, as every rank of a communicator sees it.
#pragma once

#include <string>

namespace strata {

// Filled from STRATA_REGION / _CLUSTER / _RACK / _HOST at creation and published to
// every rank; local_rank counts ranks with the same host before it.
struct Locality {
  std::string region;
  std::string cluster;
  std::string rack;
  std::string host;
  int local_rank = 0;
};

}  // namespace strata
