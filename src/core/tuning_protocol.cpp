// The communicator's side of online tuning (topology/tuner.hpp): gathering the ranks'
// timings of a size's exploration on one clock and agreeing on what they mean.
#include "core/tuning_protocol.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

using transport::Clock;

std::vector<double> agree_on_times(transport::Transport& t, int size, topology::Tuner& tuner, bool one_clock,
                                   std::uint64_t seq, CollectiveKind kind, std::uint64_t bytes, const std::vector<double>& mine,
                                   Clock::time_point deadline) {
  const int rank = t.rank();
  const auto tag = transport::collective_tag(seq, transport::Channel::tune);
  auto wait = [&](const transport::RequestPtr& r, int peer) {
    if (!transport::wait(t, r, deadline))
      throw TimeoutError("tuning on rank " + std::to_string(rank) + ": rank " + std::to_string(peer) +
                         " did not answer in time");
    if (!r->error().empty()) throw TransportError(r->error());
  };
  auto received = [&](const transport::RequestPtr& r, int peer, std::size_t want) {
    wait(r, peer);
    if (r->bytes() != want)
      throw TransportError("tuning on rank " + std::to_string(rank) + ": rank " + std::to_string(peer) + " sent " +
                           std::to_string(r->bytes()) + " bytes, not " + std::to_string(want));
  };
  // Others answer rank 0's pings with their clock, and the quickest of three round trips
  // places it, within half that round trip.
  constexpr int kPings = 3;
  std::vector<double> agreed(tuner.candidates(kind, bytes));
  const std::size_t answer = agreed.size() * sizeof(double), stamps = mine.size() * sizeof(double);
  if (rank != 0) {
    for (int i = 0; !one_clock && i < kPings; ++i) {
      double ping = 0;
      received(t.irecv(0, tag, &ping, sizeof ping), 0, sizeof ping);
      const double now = clock_seconds(Clock::now());
      wait(t.isend(0, tag, &now, sizeof now), 0);
    }
    auto r = t.irecv(0, tag, agreed.data(), answer);
    wait(t.isend(0, tag, mine.data(), stamps), 0);
    received(r, 0, answer);
    return agreed;
  }
  std::vector<std::vector<double>> offers(static_cast<std::size_t>(size), std::vector<double>(mine.size()));
  offers[0] = mine;
  for (int r = 1; r < size; ++r) {
    double offset = 0, best_trip = 0;
    for (int i = 0; !one_clock && i < kPings; ++i) {
      double theirs = 0;
      auto reply = t.irecv(r, tag, &theirs, sizeof theirs);
      const double sent = clock_seconds(Clock::now());
      wait(t.isend(r, tag, &sent, sizeof sent), r);
      received(reply, r, sizeof theirs);
      const double back = clock_seconds(Clock::now());
      if (i == 0 || back - sent < best_trip) {
        best_trip = back - sent;
        offset = theirs - (sent + back) / 2;
      }
    }
    auto& theirs = offers[static_cast<std::size_t>(r)];
    received(t.irecv(r, tag, theirs.data(), stamps), r, stamps);
    for (double& t : theirs) t -= offset;
  }
  agreed = tuner.judge(kind, bytes, offers);
  if (log::enabled(log::Level::trace)) {
    std::string line = "tuning " + std::string(to_string(kind)) + " of " + std::to_string(bytes) + " bytes, us per call:";
    for (const auto& calls : tuner.call_times(kind, bytes, offers)) {
      line += " |";
      for (double t : calls) line += " " + std::to_string(static_cast<long long>(t * 1e7 + 0.5) / 10.0).substr(0, 6);
    }
    log::trace(line);
  }
  std::vector<transport::RequestPtr> sends;
  for (int r = 1; r < size; ++r) sends.push_back(t.isend(r, tag, agreed.data(), answer));
  for (int r = 1; r < size; ++r) wait(sends[static_cast<std::size_t>(r - 1)], r);
  return agreed;
}

}  // namespace strata::detail
