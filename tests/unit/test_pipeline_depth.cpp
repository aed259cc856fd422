// How many cross-region stages a split-rail allreduce keeps in flight
// (hierarchy/plan_cost.hpp, stages_in_flight): from what the link measured of its path,
// or the plan's figures where it has measured nothing, bounded on both sides.
#include <gtest/gtest.h>

#include <cmath>

#include "hierarchy/plan.hpp"
#include "hierarchy/plan_cost.hpp"

namespace hier = strata::hierarchy;
using strata::topology::GroupCost;
using strata::topology::Level;
using strata::topology::LevelCost;
using strata::transport::PathFigures;

namespace {

// Two ranks per region, two regions 25 ms apart (one way) at `mbps` per region.
hier::Plan priced(double alpha, double mbps) {
  hier::Plan p;
  GroupCost host, wan;
  host.link.alpha = 5e-6;
  host.link.beta = 1e-10;
  wan.link.alpha = alpha;
  wan.link.beta = 8 / (mbps * 1e6);
  p.pricing = hier::Plan::Pricing{{LevelCost{Level::host, 2, host}, LevelCost{Level::region, 2, wan}}, 64 << 10};
  return p;
}

TEST(PipelineDepth, CoversFourRoundTripsOfWhatThePathCarries) {
  const auto plan = priced(0.025, 1000);
  PathFigures path;
  path.rtt_s = 0.05;
  path.rate_bytes_per_s = 62.5e6;  // 500 Mbit/s, this rail's share
  // 4 x 50 ms x 62.5 MB/s = 12.5 MB over 1 MiB steps: 12 stages, and 2 more.
  EXPECT_EQ(hier::stages_in_flight(plan, path, 1 << 20), 2u + 12u);
  // Where the path loses packets, six round trips.
  path.loss = 0.01;
  EXPECT_EQ(hier::stages_in_flight(plan, path, 1 << 20), 2u + 18u);
}

TEST(PipelineDepth, TheSlowestPairsRoundTripCountsWhenTheLinkSawAFasterOne) {
  // A rank's link measures only the peers it sends to; the figures know the slowest pair.
  const auto plan = priced(0.08, 150);
  PathFigures path;
  path.rtt_s = 0.02;
  path.rate_bytes_per_s = 9.4e6;
  EXPECT_EQ(hier::stages_in_flight(plan, path, 700000),
            2u + static_cast<std::size_t>(std::ceil(4 * 0.16 * 9.4e6 / 700000)));
}

TEST(PipelineDepth, WithoutMeasurementsTheFiguresDecideAndTheBoundsHold) {
  // Nothing measured: the figures' round trip and each rail's share of the region's rate.
  const auto plan = priced(0.025, 1000);
  const std::size_t from_figures = hier::stages_in_flight(plan, PathFigures{}, 1 << 20);
  EXPECT_EQ(from_figures, 2u + static_cast<std::size_t>(std::ceil(4 * 0.05 * (1e9 / 8 / 2) / (1 << 20))));
  // A near link needs one stage beyond the least; a huge one is capped.
  EXPECT_EQ(hier::stages_in_flight(priced(50e-6, 10000), PathFigures{}, 1 << 20), 3u);
  PathFigures huge;
  huge.rtt_s = 0.3;
  huge.rate_bytes_per_s = 5e9;
  EXPECT_EQ(hier::stages_in_flight(plan, huge, 1 << 20), 32u);
  // No figures at all, or an empty step: the least.
  EXPECT_EQ(hier::stages_in_flight(hier::Plan{}, PathFigures{}, 1 << 20), 2u);
  EXPECT_EQ(hier::stages_in_flight(plan, huge, 0), 2u);
}

}  // namespace
