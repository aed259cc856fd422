// The UCX part of setting up a same-region connection, after the hello (handle.hpp):
// the listening side creates the receive comm's worker and answers on the bootstrap
// socket with a UcxAddressHeader and the worker's address; the connecting side reads it
// and connects an endpoint. Both advance one non-blocking step per NCCL accept/connect
// call, like the rest of connection setup, and throw (failing NCCL's call) when the
// socket closes or breaks mid-way; the callers enforce the deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm.hpp"
#include "handle.hpp"
#include "socket.hpp"
#include "ucx_context.hpp"

namespace strata::nccl_net {

// Accept side: writes the answer, then hands over a UcxRecvComm.
class UcxAnswer {
 public:
  UcxAnswer(Fd bootstrap, std::string peer);
  TransferCommPtr step();  // null until the whole answer is written

 private:
  Fd fd_;
  std::string peer_;
  std::unique_ptr<UcxWorker> worker_;
  std::uint32_t tag_space_;
  std::vector<char> out_;
  std::size_t written_ = 0;
};

// Connect side: reads the answer, then hands over a UcxSendComm.
class UcxDial {
 public:
  UcxDial(Fd bootstrap, std::string peer);
  TransferCommPtr step();  // null until the whole answer is read

 private:
  // Reads into buf[got, size); true once full. Throws at EOF.
  bool read_into(char* buf, std::size_t size, std::size_t& got);
  Fd fd_;
  std::string peer_;
  UcxAddressHeader header_{};
  std::size_t header_got_ = 0;
  std::vector<char> address_;
  std::size_t address_got_ = 0;
};

}  // namespace strata::nccl_net
