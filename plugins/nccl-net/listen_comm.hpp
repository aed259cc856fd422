// A listening socket on one device, and the accept side of connection setup: connections
// are accepted as they come, their hellos read piecewise, and the streams of one
// connection (same conn_id) gathered until all K are there. accept() never blocks; it
// returns null until a whole connection is ready.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm.hpp"
#include "config.hpp"
#include "handle.hpp"
#include "socket.hpp"

namespace strata::nccl_net {

class RecvComm;

class ListenComm final : public Comm {
 public:
  ListenComm(const Device& device, const Config& config);
  const ListenHandle& handle() const { return handle_; }
  std::unique_ptr<RecvComm> accept();

 private:
  struct Incoming {
    Fd fd;
    Hello hello{};
    std::size_t got = 0;
  };
  struct Group {
    std::vector<Fd> streams;
    int arrived = 0;
    Hello first{};
  };

  // True once `in` is consumed (grouped, or dropped as not ours). Throws when it is ours
  // but from an incompatible plugin build, so accept fails instead of waiting forever.
  bool take(Incoming& in);
  std::unique_ptr<RecvComm> make_comm(Group& g);

  const Config& config_;
  std::string device_;
  Fd fd_;
  ListenHandle handle_{};
  std::vector<Incoming> incoming_;
  std::map<std::uint64_t, Group> groups_;
};

}  // namespace strata::nccl_net
