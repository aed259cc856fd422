// One NCCL device per usable network interface: up, with an IPv4 (or global IPv6)
// address. Loopback counts only when STRATA_NET_IF selects it or nothing else exists, as
// NCCL's own Socket transport does; STRATA_NET_IF takes comma-separated name prefixes
// ("=name" for an exact name), so "lo" makes tests run on loopback.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "config.hpp"
#include "nccl_abi.hpp"

namespace strata::nccl_net {

// What one device is, in the newest ABI's terms; older tables copy the fields they have.
struct Device {
  std::string name;
  std::string pci_path;  // empty for virtual interfaces
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  bool loopback = false;
  abi::PropertiesV11 props{};  // name/pciPath point into this Device: keep it in place
};

// Largest message isend/irecv accept. test() reports sizes as int, so 1 GiB keeps every
// size representable (and matches what NCCL assumes for a v8 plugin).
inline constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
// Buffers in one grouped receive (maxRecvs); NCCL's IB transport uses 8 too.
inline constexpr int kMaxRecvs = 8;

// Devices in interface order. A non-empty STRATA_NET_IF that matches nothing yields none,
// which makes NCCL fall back to its next network.
std::vector<Device> discover_devices(const Config& config);

}  // namespace strata::nccl_net
