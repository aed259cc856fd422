// Sends each peer's traffic over the fabric that reaches it: peers in this rank's region
// over the intra-region transport (UCX or TCP), peers in other regions over the striped
// WAN link. Algorithms still see one transport.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace strata::wan {

class RoutedTransport : public transport::Transport, public transport::LinkReport {
 public:
  // Neither fabric can wake a wait on the other, so wait_event sleeps in turns of this
  // length on each: a message that arrives while its receiver sleeps on the other fabric
  // waits up to one turn, half a turn on average.
  static constexpr std::chrono::microseconds kTurn{50};

  // remote[r]: rank r is in another region. It carries the local transport's host
  // segment, which ranks of other regions never share, even where an emulation puts
  // them on this host.
  RoutedTransport(std::unique_ptr<Transport> local, std::unique_ptr<Transport> wan,
                  std::vector<bool> remote);

  const char* name() const override { return name_.c_str(); }
  int rank() const override { return local_->rank(); }
  int size() const override { return local_->size(); }
  transport::RequestPtr isend(int peer, transport::Tag tag, const void* buf, std::size_t bytes) override;
  transport::RequestPtr irecv(int peer, transport::Tag tag, void* buf, std::size_t capacity) override;
  bool probe(int peer, transport::Tag tag) override { return route(peer).probe(peer, tag); }
  bool progress() override;
  void wait_event(std::chrono::microseconds max) override;
  void abort(const std::string& why) override;
  bool aborted() const override;
  std::string abort_reason() const override;
  // Only the WAN side crosses regions; intra-region traffic is not counted.
  const LinkReport& report() const override { return *this; }
  transport::LinkProfile profile() const override { return {.wait_latency = kTurn / 2}; }
  transport::TrafficCounters traffic() const override { return wan_->report().traffic(); }
  transport::PathFigures path() const override { return wan_->report().path(); }
  std::string trouble() const override;
  bool settled() const override { return local_->settled() && wan_->settled(); }

 private:
  Transport& route(int peer) { return remote_.at(static_cast<std::size_t>(peer)) ? *wan_ : *local_; }

  std::unique_ptr<Transport> local_;
  std::unique_ptr<Transport> wan_;
  std::vector<bool> remote_;
  std::string name_;
};

}  // namespace strata::wan
