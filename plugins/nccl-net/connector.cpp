#include "connector.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "errors.hpp"
#include "log.hpp"

namespace strata::nccl_net {

Connector::Connector(const ListenHandle& handle, const Config& config)
    : nonce_(handle.nonce), deadline_(std::chrono::steady_clock::now() + config.connect_timeout) {
  const bool same_region = handle.region_hash == region_hash(config.region);
  const socklen_t len = handle_address(handle, &addr_, same_region);
  char remote_region[sizeof handle.region + 1] = {};
  std::memcpy(remote_region, handle.region, sizeof handle.region);
  int count = 1;
  ucx_ = same_region && config.intra == IntraPath::ucx;
  if (!same_region) {
    opt_.striped = opt_.checksum = opt_.acks = true;
    opt_.frame_bytes = config.stripe_bytes;
    if (config.emulation.window) {
      // An emulated window smaller than a stripe would still let one whole stripe out per
      // stream (an idle stream always takes one); cap stripes so the window holds.
      opt_.window = config.emulation.window;
      opt_.frame_bytes = std::min(opt_.frame_bytes, opt_.window);
    }
    opt_.delay = config.emulation.delay;
    opt_.rejoin = true;
    opt_.reconnect_for = config.reconnect_for;
    opt_.tuning = config.tuning;
    opt_.ports = config.ports;
    opt_.cut_after = config.emulation.cut_after;
    opt_.tls = plugin_tls();
    // Each TLS record's AES-GCM tag already authenticates its bytes, and one that fails
    // breaks the stream, which is redialled and resent as after a CRC mismatch.
    opt_.checksum = !opt_.tls;
    count = config.wan_streams;
  }
  peer_ = describe(addr_) + " (region '" + remote_region + "')";
  const std::uint64_t conn_id = random_u64();
  for (int i = 0; i < count; ++i) {
    Out o;
    o.wire = Wire(start_connect(addr_, len, opt_.striped ? &config.tuning : nullptr));
    Hello& h = o.hello;
    h.magic = Hello::kMagic;
    h.version = Hello::kVersion;
    h.flags = static_cast<std::uint16_t>((opt_.checksum ? kChecksum : 0) | (opt_.acks ? kAcks : 0) |
                                         (ucx_ ? kUcx : 0) | (opt_.rejoin ? kRejoinable : 0) |
                                         (opt_.tls ? kTls : 0));
    h.stream_index = static_cast<std::uint16_t>(i);
    h.stream_count = static_cast<std::uint16_t>(count);
    h.listen_nonce = handle.nonce;
    h.conn_id = conn_id;
    h.region_hash = region_hash(config.region);
    std::strncpy(h.region, config.region.c_str(), sizeof h.region - 1);
    streams_.push_back(std::move(o));
  }
  log::info("connecting to %s: %s, %d stream(s)", peer_.c_str(),
            opt_.striped ? (opt_.tls ? "striped (another region), TLS" : "striped (another region)")
            : ucx_       ? "UCX (same region), TCP bootstrap"
                         : "direct TCP (same region)",
            count);
  static std::once_flag warned;
  if (opt_.striped && !opt_.tls)
    std::call_once(warned, [] {
      log::warn("traffic to other regions goes in clear text (authenticated by the job's secret, not "
                "encrypted): set STRATA_WAN_TLS=1 on every rank to encrypt it");
    });
}

TransferCommPtr Connector::step() {
  if (dial_) return dial();
  bool ready = true;
  for (Out& o : streams_) ready &= advance(o);
  if (!ready) {
    check_deadline();
    return nullptr;
  }
  if (ucx_) {
    dial_ = std::make_unique<UcxDial>(streams_[0].wire.take_fd(), peer_);
    return dial();
  }
  std::vector<Wire> wires;
  for (Out& o : streams_) wires.push_back(std::move(o.wire));
  log::info("connected to %s", peer_.c_str());
  return TransferCommPtr(new SendComm(std::move(wires), opt_, peer_, std::move(rejoins_)));
}

bool Connector::advance(Out& o) {
  if (o.ready) return true;
  if (!o.connected) o.connected = connect_finished(o.wire.fd());
  if (!o.connected) return false;
  // The rejoin port goes into every hello, so it is opened before the first is written.
  if (opt_.rejoin && !rejoins_) {
    rejoins_ = RejoinListener(o.wire.fd(), streams_[0].hello.conn_id, static_cast<int>(streams_.size()),
                              opt_.tuning.buffer, opt_.tls, opt_.ports);
    for (Out& each : streams_) each.hello.reserved = rejoins_.port();
  }
  if (!o.proven) {
    if (!o.auth) o.auth = std::make_unique<DialAuth>(plugin_secret(), o.hello);
    if (!(o.proven = o.auth->step(o.wire.fd(), peer_))) return false;
    if (opt_.tls) o.wire.start_tls(opt_.tls, true);
  }
  try {
    o.ready = !o.wire.tls() || o.wire.handshake(peer_);
  } catch (const NetError& e) {
    throw NetError(e.code(), std::string(e.what()) +
                                 " (STRATA_WAN_TLS and STRATA_TLS_CERT/_KEY/_CA must be set alike on every rank, "
                                 "with certificates the same authority signed)");
  }
  return o.ready;
}

TransferCommPtr Connector::dial() {
  TransferCommPtr comm = dial_->step();
  if (!comm) check_deadline();
  return comm;
}

void Connector::check_deadline() const {
  if (std::chrono::steady_clock::now() > deadline_)
    system_failure("connecting to " + peer_ + " timed out (STRATA_NET_CONNECT_TIMEOUT_S)");
}

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::unique_ptr<Connector>> live;
  std::uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: NCCL threads may outlive statics
  return *r;
}

}  // namespace

TransferCommPtr connect_step(ListenHandle& handle, const Config& config) {
  Registry& reg = registry();
  Connector* c = nullptr;
  if (handle.connect_id != 0) {
    std::lock_guard lock(reg.mu);
    auto it = reg.live.find(handle.connect_id);
    if (it == reg.live.end() || it->second->nonce() != handle.nonce)
      misuse("connect called again with a handle whose connection is unknown or finished");
    c = it->second.get();
  } else {
    auto fresh = std::make_unique<Connector>(handle, config);
    std::lock_guard lock(reg.mu);
    handle.connect_id = reg.next_id++;
    c = fresh.get();
    reg.live.emplace(handle.connect_id, std::move(fresh));
  }
  // One handle is driven by one thread at a time, so the step needs no lock; a failure
  // or a finished comm removes the entry, and the handle is reset for a clean retry.
  TransferCommPtr comm;
  try {
    comm = c->step();
  } catch (...) {
    std::lock_guard lock(reg.mu);
    reg.live.erase(handle.connect_id);
    handle.connect_id = 0;
    throw;
  }
  if (comm) {
    std::lock_guard lock(reg.mu);
    reg.live.erase(handle.connect_id);
    handle.connect_id = 0;
  }
  return comm;
}

}  // namespace strata::nccl_net
