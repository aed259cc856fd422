// Strings strata reads from the environment and from callers: the WAN emulation spec, the
// compression grammar, the algorithm rules, host:port addresses and unique ids. Each is
// either understood or an InvalidArgument; a parsed codec spec prints back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/tcp_store.hpp"
#include "core/unique_id.hpp"
#include "quant/codec.hpp"
#include "strata/compression.hpp"
#include "strata/errors.hpp"
#include "topology/algorithm_rules.hpp"
#include "wan/emulation.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  try {
    wan::parse_emulation(s);
  } catch (const InvalidArgument&) {
  }
  try {
    const quant::CodecSpec spec = quant::parse_codec(s);
    if (!(quant::parse_codec(quant::to_string(spec)) == spec)) std::abort();
  } catch (const InvalidArgument&) {
  }
  try {
    Compression::parse(s);
  } catch (const InvalidArgument&) {
  }
  try {
    topology::parse_algorithm_rules(s, "STRATA_ALGO", true);
  } catch (const InvalidArgument&) {
  }
  try {
    bootstrap::split_host_port(s, "fuzzed address");
  } catch (const InvalidArgument&) {
  }
  UniqueId id;
  std::memcpy(id.bytes.data(), s.data(), std::min(s.size(), id.bytes.size()));
  try {
    detail::parse_unique_id(id);
  } catch (const InvalidArgument&) {
  }
  return 0;
}
