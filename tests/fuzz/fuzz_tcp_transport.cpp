// The TCP transport's receive path as a peer, or anything that connects, drives it over a
// real loopback connection into a real transport. The first input byte chooses which
// receives are posted beforehand (bits 0-1: matched, truncated and unexpected frames all
// happen), whether the stream ends (bit 2), and whether the fuzzer is a stranger whose
// bytes meet the job's handshake (bit 3) or a member that proves itself as rank 1 and then
// sends frames. The unexpected budget is small, so frames also stall waiting for their
// receive. Nothing may crash, hang or allocate what a header claims.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "loopback.hpp"
#include "transport/tcp/tcp_transport.hpp"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flags = data[0];
  transport::tcp::TcpTransport t(0, 2, "127.0.0.1", {}, 64u << 10);
  t.set_peer_addresses({t.address(), "127.0.0.1:9"});
  static const std::size_t kCapacity[] = {0, 100, 70000};
  std::vector<std::unique_ptr<char[]>> bufs;
  for (int i = 0; i < (flags & 3); ++i) {
    bufs.emplace_back(new char[kCapacity[i] + 1]);
    t.irecv(1, static_cast<transport::Tag>(i), bufs.back().get(), kCapacity[i]);
  }
  const int fd = fuzz::connect_to(t.address());
  if (fd < 0) return 0;
  const std::uint32_t rank1 = 1;
  bootstrap::auth::Bytes me(4);
  std::memcpy(me.data(), &rank1, 4);
  if (!(flags & 8) && !fuzz::prove_as_dialer(fd, bootstrap::auth::Channel::tcp, me, [&] { t.progress(); })) {
    fuzz::close_hard(fd);
    return 0;
  }
  fuzz::write_all(fd, data + 1, size - 1);
  if (flags & 4) ::shutdown(fd, SHUT_WR);  // the peer leaves: the stream ends
  // Until nothing has happened for a while: frames parsed, stalled or failed.
  int idle = 0;
  for (int i = 0; i < 4000 && idle < 10; ++i) {
    if (t.progress()) {
      idle = 0;
    } else {
      ++idle;
      t.wait_event(std::chrono::microseconds(20));
    }
  }
  fuzz::close_hard(fd);
  return 0;
}
