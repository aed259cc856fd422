// The NCCL plugin's out-of-band handle (128 bytes NCCL copies between ranks), the hello
// at the start of every stream, and the UCX answer header: any bytes, checked as the
// plugin checks them. A handle or hello it accepts is one it can act on safely.
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "handle.hpp"

using namespace strata::nccl_net;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < sizeof(ListenHandle) + sizeof(Hello) + sizeof(UcxAddressHeader)) return 0;
  ListenHandle handle;
  std::memcpy(&handle, data, sizeof handle);
  try {
    check_handle(handle);
    sockaddr_storage addr;
    const socklen_t len = handle_address(handle, &addr);
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) std::abort();
    if (len > sizeof addr) std::abort();
  } catch (const NetError&) {
  }
  Hello hello;
  std::memcpy(&hello, data + sizeof handle, sizeof hello);
  if (check_hello(hello, handle.nonce) == HelloVerdict::ours &&
      (hello.stream_count == 0 || hello.stream_index >= hello.stream_count || hello.stream_count > 64))
    std::abort();
  UcxAddressHeader answer;
  std::memcpy(&answer, data + sizeof handle + sizeof hello, sizeof answer);
  if (plausible(answer) && (answer.length == 0 || answer.length > UcxAddressHeader::kMaxAddress)) std::abort();
  return 0;
}
