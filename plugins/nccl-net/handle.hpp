// What travels out of band and at connection time.
//
// ListenHandle fills NCCL's opaque connection handle (128 bytes, copied by NCCL's
// bootstrap from the listening rank to the connecting one): where to connect, a nonce
// naming the listener, and the listener's region, from which the connecting side picks
// the direct or the striped path. NCCL calls connect again and again with the same
// handle buffer until it returns a comm, so the connecting side keeps the id of its
// in-progress state in `connect_id` (zero as sent).
//
// Hello is the first 64 bytes on every stream of a connection: which listener it is
// for, which connection and stream it belongs to, and how the data will be framed or,
// for the UCX path, that the listener must answer with its worker address
// (ucx_handshake.hpp). The connecting side chooses the path; the listener follows. A
// receiver that redials a broken striped stream sends one too (kRejoin).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "nccl_abi.hpp"

namespace strata::nccl_net {

struct ListenHandle {
  static constexpr std::uint32_t kMagic = 0x4C525453;  // "STRL"
  // 2: the advertised address (STRATA_ADVERTISE_ADDR) beside the listening one.
  static constexpr std::uint16_t kVersion = 2;
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t family;  // AF_INET or AF_INET6
  std::uint16_t port;
  // The address peers in other regions dial, on the same port (behind NAT); 0: none.
  std::uint16_t public_family;
  std::uint32_t reserved1;
  unsigned char addr[16];
  std::uint64_t nonce;
  std::uint64_t connect_id;  // the connecting side's progress, see above
  std::uint64_t region_hash;
  unsigned char public_addr[16];
  char region[56];  // for logs; truncated, NUL-terminated
};
static_assert(sizeof(ListenHandle) <= abi::kHandleMaxSize);

enum HelloFlags : std::uint16_t {
  kChecksum = 1,  // frames carry a CRC32C of their payload that the receiver checks
  kAcks = 2,      // the receiver acknowledges frames on each stream
  kUcx = 4,       // same region over UCX: the listener answers with its worker address
  // Striped: the sender listens at port `Hello::reserved` of its end's address, where the
  // receiver redials a stream that broke (stream_rejoin.hpp).
  kRejoinable = 8,
  // This connection replaces stream `stream_index` of connection `conn_id`, sent to the
  // sender's own port rather than to a listener.
  kRejoin = 16,
  // Striped: every stream runs inside TLS 1.3 (STRATA_WAN_TLS=1), the dialer as client,
  // from the first byte after the job's handshake; so does every redial of one.
  kTls = 32,
};

struct Hello {
  static constexpr std::uint32_t kMagic = 0x48525453;  // "STRH"
  // 2: kUcx. A version-1 listener would not answer a UCX connect, so it refuses instead.
  // 3: kRejoinable/kRejoin. A version-2 receiver would not redial a broken stream, and its
  // sender would wait for it in vain.
  // 4: kTls. A version-3 listener would read the TLS handshake as frames.
  static constexpr std::uint16_t kVersion = 4;
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t flags;
  std::uint16_t stream_index;
  std::uint16_t stream_count;
  std::uint32_t reserved;  // kRejoinable: the port the sender takes rejoins on
  std::uint64_t listen_nonce;
  std::uint64_t conn_id;  // groups the streams of one connection
  std::uint64_t region_hash;
  char region[24];  // for logs
};
static_assert(sizeof(Hello) == 64);

// What a listener makes of a hello: one for it, one from another version of the plugin
// (an error worth telling), or anything else (dropped: a stray or stale connection).
enum class HelloVerdict { ours, other_version, not_ours };
HelloVerdict check_hello(const Hello& h, std::uint64_t listen_nonce);

// The listener's answer on a same-region (UCX) connection: this header, then `length`
// bytes of its UCX worker address.
struct UcxAddressHeader {
  static constexpr std::uint32_t kMagic = 0x41525453;  // "STRA"
  static constexpr std::uint32_t kMaxAddress = 1 << 20;  // far above any real worker address
  std::uint32_t magic;
  std::uint32_t tag_space;  // high half of every ucp tag on this connection
  std::uint32_t length;     // address bytes that follow
  std::uint32_t reserved;
};
static_assert(sizeof(UcxAddressHeader) == 16);
// Whether the connecting side may allocate and read the address it announces.
bool plausible(const UcxAddressHeader& h);

std::uint64_t region_hash(const std::string& region);
std::uint64_t random_u64();

// Listener address into a handle; the handle's address back as a socket address.
// advertise: an IP address in text, or "" (checked by the settings: net::checked_advertise).
ListenHandle make_handle(const sockaddr_storage& addr, std::uint16_t port, std::uint64_t nonce,
                         const std::string& region, const std::string& advertise = "");
// Throws NetError(invalid_argument) for a handle this plugin did not write.
void check_handle(const ListenHandle& h);
// The address to dial: the advertised one for a peer in another region, when there is one.
socklen_t handle_address(const ListenHandle& h, sockaddr_storage* out, bool same_region = true);

}  // namespace strata::nccl_net
