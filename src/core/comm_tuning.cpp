// The communicator's side of online tuning (topology/tuner.hpp): agreeing on the
// candidates' times after a size's exploration, and reading what was learned.
#include "core/comm_impl.hpp"

#include <algorithm>

namespace strata::detail {

using transport::Clock;

std::vector<double> CommImpl::agree_on_times(std::uint64_t seq, const std::vector<double>& mine,
                                             Clock::time_point deadline) {
  const auto tag = transport::collective_tag(seq, transport::Channel::tune);
  const std::size_t bytes = mine.size() * sizeof(double);
  auto wait = [&](const transport::RequestPtr& r, int peer) {
    if (!transport::wait(*transport_, r, deadline))
      throw TimeoutError("tuning on rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                         " did not answer in time");
    if (!r->error().empty()) throw TransportError(r->error());
  };
  std::vector<double> most(mine.size());
  if (rank_ != 0) {
    auto r = transport_->irecv(0, tag, most.data(), bytes);
    wait(transport_->isend(0, tag, mine.data(), bytes), 0);
    wait(r, 0);
    if (r->bytes() != bytes) throw TransportError("tuning: rank 0 answered " + std::to_string(r->bytes()) + " bytes");
    return most;
  }
  std::vector<std::vector<double>> theirs(static_cast<std::size_t>(size_), std::vector<double>(mine.size()));
  std::vector<transport::RequestPtr> recvs;
  for (int r = 1; r < size_; ++r) recvs.push_back(transport_->irecv(r, tag, theirs[static_cast<std::size_t>(r)].data(), bytes));
  most = mine;
  for (int r = 1; r < size_; ++r) {
    const auto& req = recvs[static_cast<std::size_t>(r - 1)];
    wait(req, r);
    if (req->bytes() != bytes) throw TransportError("tuning: rank " + std::to_string(r) + " sent " + std::to_string(req->bytes()) + " bytes");
    for (std::size_t c = 0; c < most.size(); ++c) most[c] = std::max(most[c], theirs[static_cast<std::size_t>(r)][c]);
  }
  std::vector<transport::RequestPtr> sends;
  for (int r = 1; r < size_; ++r) sends.push_back(transport_->isend(r, tag, most.data(), bytes));
  for (int r = 1; r < size_; ++r) wait(sends[static_cast<std::size_t>(r - 1)], r);
  return most;
}

std::string CommImpl::tuning_report() {
  check_usable();
  std::string out;
  auto work = engine_->submit([&]() -> std::optional<Pending> {
    if (tuner_) out = tuner_->report();
    return std::nullopt;
  });
  Work(work).wait();
  return out;
}

}  // namespace strata::detail
