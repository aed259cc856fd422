#include "ucx_handshake.hpp"

#include <cstring>

#include "errors.hpp"
#include "handle.hpp"
#include "log.hpp"
#include "ucx_path.hpp"

namespace strata::nccl_net {

UcxAnswer::UcxAnswer(Fd bootstrap, std::string peer)
    : fd_(std::move(bootstrap)),
      peer_(std::move(peer)),
      worker_(std::make_unique<UcxWorker>()),
      tag_space_(static_cast<std::uint32_t>(random_u64())) {
  const std::vector<char> address = worker_->address();
  const UcxAddressHeader h{UcxAddressHeader::kMagic, tag_space_, static_cast<std::uint32_t>(address.size()), 0};
  out_.resize(sizeof h);
  std::memcpy(out_.data(), &h, sizeof h);
  out_.insert(out_.end(), address.begin(), address.end());
}

TransferCommPtr UcxAnswer::step() {
  if (written_ < out_.size()) {
    const iovec iov{out_.data() + written_, out_.size() - written_};
    written_ += send_some(fd_.get(), &iov, 1);  // throws when the peer reset the connection
    if (written_ < out_.size()) return nullptr;
  }
  log::info("accepted a same-region connection from %s: UCX (%zu-byte worker address)", peer_.c_str(),
            out_.size() - sizeof(UcxAddressHeader));
  return TransferCommPtr(new UcxRecvComm(std::move(worker_), std::move(fd_), tag_space_, peer_));
}

UcxDial::UcxDial(Fd bootstrap, std::string peer) : fd_(std::move(bootstrap)), peer_(std::move(peer)) {}

bool UcxDial::read_into(char* buf, std::size_t size, std::size_t& got) {
  bool eof = false;
  got += recv_some(fd_.get(), buf + got, size - got, &eof);
  if (eof)
    throw NetError(abi::remote_error, "connecting to " + peer_ + ": the listener closed the connection "
                                          "before sending its UCX address");
  return got == size;
}

TransferCommPtr UcxDial::step() {
  if (header_got_ < sizeof header_) {
    if (!read_into(reinterpret_cast<char*>(&header_), sizeof header_, header_got_)) return nullptr;
    if (!plausible(header_))
      throw NetError(abi::remote_error, "connecting to " + peer_ + ": malformed UCX address answer");
    address_.resize(header_.length);
  }
  if (!read_into(address_.data(), address_.size(), address_got_)) return nullptr;
  auto comm = TransferCommPtr(
      new UcxSendComm(std::make_unique<UcxWorker>(), address_, std::move(fd_), header_.tag_space, peer_));
  log::info("connected to %s: UCX (same region)", peer_.c_str());
  return comm;
}

}  // namespace strata::nccl_net
