#include "devices.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "log.hpp"

namespace strata::nccl_net {

namespace {

// NCCL Socket's fallback too; NCCL itself treats speed <= 0 as this.
constexpr int kDefaultSpeedMbps = 10000;

bool selected(const std::string& name, const std::string& spec) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    if (item[0] == '=') {
      if (name == item.substr(1)) return true;
    } else if (name.compare(0, item.size(), item) == 0) {
      return true;
    }
  }
  return false;
}

// /sys/class/net/IF/speed is in Mbps; virtual interfaces report -1 or fail the read.
int sysfs_speed(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  long v = 0;
  if (in >> v && v > 0 && v < INT_MAX) return static_cast<int>(v);
  return 0;
}

std::string pci_path(const std::string& ifname) {
  const std::string link = "/sys/class/net/" + ifname + "/device";
  std::unique_ptr<char, decltype(&std::free)> real(realpath(link.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : std::string();
}

// Connections a process can hold, given one descriptor per stream.
int max_comms(const Config& config) {
  rlimit lim{};
  long files = 1024;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    files = static_cast<long>(std::min<rlim_t>(lim.rlim_cur, 1 << 24));
  const long per_comm = std::max(1, config.wan_streams);
  return static_cast<int>(std::clamp((files - 64) / per_comm, 1L, 65536L));
}

bool usable_address(const sockaddr* sa) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET) return true;
  if (sa->sa_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return !IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr);  // would need a scope id in the handle
  }
  return false;
}

}  // namespace

std::vector<Device> discover_devices(const Config& config) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    log::warn("getifaddrs failed: %s", std::strerror(errno));
    return {};
  }
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, &freeifaddrs);

  // Interface order, the first IPv4 address of each (else a global IPv6 one).
  std::vector<Device> found;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!(ifa->ifa_flags & IFF_UP) || !usable_address(ifa->ifa_addr)) continue;
    auto same = std::find_if(found.begin(), found.end(),
                             [&](const Device& d) { return d.name == ifa->ifa_name; });
    if (same != found.end()) {
      if (same->addr.ss_family == AF_INET6 && ifa->ifa_addr->sa_family == AF_INET) {
        std::memcpy(&same->addr, ifa->ifa_addr, sizeof(sockaddr_in));
        same->addr_len = sizeof(sockaddr_in);
      }
      continue;
    }
    Device d;
    d.name = ifa->ifa_name;
    d.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    d.addr_len = ifa->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&d.addr, ifa->ifa_addr, d.addr_len);
    found.push_back(std::move(d));
  }

  std::vector<Device> devices;
  if (!config.interfaces.empty()) {
    for (auto& d : found)
      if (selected(d.name, config.interfaces)) devices.push_back(std::move(d));
    if (devices.empty())
      log::warn("STRATA_NET_IF=%s matches no usable interface", config.interfaces.c_str());
  } else {
    for (auto& d : found)
      if (!d.loopback) devices.push_back(std::move(d));
    if (devices.empty())
      for (auto& d : found)
        if (d.loopback) devices.push_back(std::move(d));
  }

  const int comms = max_comms(config);
  const int emulated_us = static_cast<int>(
      std::chrono::duration_cast<std::chrono::microseconds>(config.emulation.delay).count());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    Device& d = devices[i];
    d.pci_path = d.loopback ? std::string() : pci_path(d.name);
    const int sysfs = sysfs_speed(d.name);
    abi::PropertiesV11& p = d.props;
    p.guid = i;  // distinct per device: no two share a port
    p.ptrSupport = abi::kPtrHost;  // no GPUDirect: NCCL stages GPU data through host memory
    p.regIsGlobal = 1;             // registration is a no-op token, valid on any comm
    p.forceFlush = 0;
    p.speed = config.speed_mbps > 0 ? config.speed_mbps : sysfs > 0 ? sysfs : kDefaultSpeedMbps;
    p.port = 0;
    // NCCL truncates to whole us and adds it to its inter-node latency; 0 keeps its defaults.
    p.latency = float(config.latency_us >= 0 ? config.latency_us : emulated_us);
    p.maxComms = comms;
    p.maxRecvs = kMaxRecvs;
    p.netDeviceType = abi::kDeviceHost;
    p.netDeviceVersion = abi::kDeviceInvalidVersion;
    p.vProps.ndevs = 1;
    p.vProps.devs[0] = static_cast<int>(i);
    p.maxP2pBytes = kMaxMessageBytes;
    p.maxCollBytes = kMaxMessageBytes;
    p.maxMultiRequestSize = 1;
  }
  // Pointers only once the vector no longer moves.
  for (Device& d : devices) {
    d.props.name = d.name.data();
    d.props.pciPath = d.pci_path.empty() ? nullptr : d.pci_path.data();
    char host[INET6_ADDRSTRLEN] = "?";
    const void* raw = d.addr.ss_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&d.addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&d.addr)->sin6_addr);
    inet_ntop(d.addr.ss_family, raw, host, sizeof host);
    log::info("device %d: %s %s, %d Mbps%s, latency %.0f us, pci %s", d.props.vProps.devs[0],
              d.name.c_str(), host, d.props.speed,
              config.speed_mbps > 0 ? " (STRATA_NET_SPEED_MBPS)"
              : sysfs_speed(d.name) > 0 ? "" : " (default: sysfs has none)",
              double(d.props.latency), d.pci_path.empty() ? "none" : d.pci_path.c_str());
  }
  return devices;
}

}  // namespace strata::nccl_net
