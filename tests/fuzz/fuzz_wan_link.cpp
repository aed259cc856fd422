// The WAN link as a peer drives it over real loopback connections into a real transport.
// The first byte chooses the side and the shape:
//   bit 0  frames are built from the input and sealed with correct CRCs (the fuzzer then
//          explores everything behind the checks), else the bytes go to the socket raw
//   bit 1  the transport sends a message to the fuzzer, which answers on the stream the
//          transport opened with acknowledgements and goodbyes; else the fuzzer sends
//          data frames after proving itself (the job's handshake) as rank 1
//   bit 2  a receive is posted first;  bit 3  emulated delay of 1 ms
//   bit 4  inbound, the fuzzer is a stranger: its bytes meet the job's handshake
// Nothing may crash, hang, or allocate what a frame header claims.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "loopback.hpp"
#include "link/crc32c.hpp"
#include "link/frame.hpp"
#include "wan/wan_transport.hpp"

using namespace strata;

namespace {

// Frames from the input: per frame a kind selector and 48 bytes of header fields, then
// up to `length` payload bytes taken from what follows (clipped to what is left).
std::vector<unsigned char> sealed_frames(const std::uint8_t* p, std::size_t n) {
  constexpr std::size_t kFields = 49;
  std::vector<unsigned char> out;
  while (n >= kFields) {
    link::FrameHeader h;
    const std::uint8_t kind = p[0] % 4;
    std::uint32_t raw_kind, length;
    std::memcpy(&raw_kind, p + 1, 4);
    std::memcpy(&length, p + 5, 4);
    std::memcpy(&h.seq, p + 9, 8);
    std::memcpy(&h.msg_id, p + 17, 8);
    std::memcpy(&h.offset, p + 25, 8);
    std::memcpy(&h.total, p + 33, 8);
    std::memcpy(&h.tag, p + 41, 8);
    p += kFields;
    n -= kFields;
    h.kind = kind == 0 ? link::FrameKind::data : kind == 1 ? link::FrameKind::ack
           : kind == 2 ? link::FrameKind::goodbye : static_cast<link::FrameKind>(raw_kind);
    const std::size_t payload = h.kind == link::FrameKind::data ? std::min<std::size_t>(length % 8192, n) : 0;
    h.length = static_cast<std::uint32_t>(payload);
    const auto header = link::seal(h, link::crc32c(p, payload));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), p, p + payload);
    p += payload;
    n -= payload;
  }
  return out;
}

void drive(wan::WanTransport& t, int spins) {
  int idle = 0;
  for (int i = 0; i < spins && idle < 10; ++i) {
    if (t.progress()) {
      idle = 0;
    } else {
      ++idle;
      t.wait_event(std::chrono::microseconds(20));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t flags = data[0];
  wan::WanOptions opt;
  opt.streams = 2;
  opt.stripe_bytes = 4096;
  opt.unexpected_bytes = 64u << 10;
  opt.reconnect_for = std::chrono::milliseconds(20);
  if (flags & 8) opt.emulation.delay = std::chrono::milliseconds(1);
  wan::WanTransport t(0, 2, "127.0.0.1", opt);
  std::vector<unsigned char> wire = (flags & 1) ? sealed_frames(data + 1, size - 1)
                                                : std::vector<unsigned char>(data + 1, data + size);
  std::vector<char> in(8192), out(5000, 'x');
  if (flags & 4) t.irecv(1, 0, in.data(), in.size());
  std::vector<int> fds;
  if (flags & 2) {
    // The transport connects its streams to us; we answer on them.
    std::string address;
    const int listener = fuzz::listen_on_loopback(&address);
    if (listener < 0) return 0;
    t.set_peer_addresses({t.address(), address});
    t.isend(1, 3, out.data(), out.size());
    for (int i = 0; i < 400 && fds.size() < 2; ++i) {
      t.progress();
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) {
        t.wait_event(std::chrono::microseconds(20));
        continue;
      }
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      if (fuzz::answer_as_listener(fd, bootstrap::auth::Channel::wan, 8, [&] { t.progress(); })) fds.push_back(fd);
      else fuzz::close_hard(fd);
    }
    ::close(listener);
    drive(t, 200);
    for (std::size_t k = 0; k < fds.size(); ++k) {
      fuzz::drain(fds[k]);
      // Halves of the input on each stream, so both streams see acks (and goodbyes).
      const std::size_t half = wire.size() / 2;
      if (k == 0) fuzz::write_all(fds[k], wire.data(), half);
      else fuzz::write_all(fds[k], wire.data() + half, wire.size() - half);
    }
  } else {
    t.set_peer_addresses({t.address(), "127.0.0.1:9"});
    const int fd = fuzz::connect_to(t.address());
    if (fd < 0) return 0;
    fds.push_back(fd);
    if (!(flags & 16)) {
      const std::uint32_t who[2] = {1, static_cast<std::uint32_t>(data[1] & 1)};
      bootstrap::auth::Bytes payload(sizeof who);
      std::memcpy(payload.data(), who, sizeof who);
      if (!fuzz::prove_as_dialer(fd, bootstrap::auth::Channel::wan, payload, [&] { t.progress(); })) wire.clear();
    }
    fuzz::write_all(fd, wire.data(), wire.size());
  }
  drive(t, 4000);
  for (int fd : fds) fuzz::close_hard(fd);
  drive(t, 100);
  return 0;
}
