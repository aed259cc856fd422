// Topology files (STRATA_TOPO_FILE) are text a user or a scheduler wrote: any text is
// either a topology or an InvalidArgument naming what is wrong with it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/errors.hpp"
#include "topology/topology_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the world size the file is checked against (or none).
  const int world = data[0] % 17 - 1;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    strata::topology::parse_topology(text, "fuzz.textproto", world);
  } catch (const strata::InvalidArgument&) {
  }
  return 0;
}
