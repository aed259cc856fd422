#include "hierarchy/plan_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/compressed_allreduce.hpp"

namespace strata::hierarchy {

Plan::Pricing price_levels(const topology::Selector& sel, const Plan& plan) {
  Plan::Pricing out;
  out.small_bytes = sel.figures().small_bytes;
  for (const auto& lg : plan.levels) {
    std::size_t largest = 0, at = 0;
    for (std::size_t k = 0; k < lg.groups.size(); ++k)
      if (lg.groups[k].size() > largest) largest = lg.groups[k].size(), at = k;
    collectives::Group g;
    g.ranks = lg.groups[at];
    out.levels.push_back(topology::LevelCost{lg.level, static_cast<int>(largest), sel.group_cost(g)});
  }
  return out;
}

namespace {

// Split rail: every rank of a region is on some rail, and all rails cross at once, so
// the region's WAN egress carries one shard per rail (the whole vector, as it should).
// A top-level group has one member per region and does not show that by itself. The
// broadcast's latency path is the exception: only the root's rail crosses.
std::vector<topology::LevelCost> rails_sharing(std::vector<topology::LevelCost> levels) {
  if (levels.empty()) return levels;
  double rails = 1;
  for (std::size_t i = 0; i + 1 < levels.size(); ++i) rails *= levels[i].size;
  levels.back().cost.ring_sharing *= rails;
  levels.back().cost.wan_sharing *= rails;
  return levels;
}

constexpr auto kAlways = std::numeric_limits<std::size_t>::max();

topology::Cost latency_cost(const std::vector<topology::LevelCost>& levels, CollectiveKind kind, double bytes) {
  return topology::predict_split_rail(kind, kind == CollectiveKind::broadcast ? levels : rails_sharing(levels), bytes,
                                      kAlways);
}

topology::Cost pipeline_cost(const std::vector<topology::LevelCost>& levels, CollectiveKind kind, double bytes) {
  return topology::predict_split_rail(kind, rails_sharing(levels), bytes, 0);
}

}  // namespace

std::size_t stages_in_flight(const Plan& plan, const transport::PathFigures& path, std::size_t step_bytes) {
  constexpr std::size_t kLeast = 2, kMost = 32;
  double rtt = path.rtt_s, rate = path.rate_bytes_per_s;
  if (plan.pricing && !plan.pricing->levels.empty()) {
    const topology::GroupCost& top = plan.pricing->levels.back().cost;
    // The top group's slowest pair, from the figures every rank shares: a rank's own link
    // measures only the peers it sends to, and a ring's stage waits on every hop.
    rtt = std::max(rtt, 2 * top.link.alpha);
    // Every rail crosses at once, each with its share of the region's egress.
    double rails = 1;
    for (std::size_t i = 0; i + 1 < plan.pricing->levels.size(); ++i) rails *= plan.pricing->levels[i].size;
    if (rate <= 0 && top.link.beta > 0) rate = 1 / (top.link.beta * rails);
  }
  if (rtt <= 0 || rate <= 0 || step_bytes == 0) return kLeast;
  // With every stage's messages in one queue per peer, a stage's later steps wait behind
  // the younger stages' earlier ones: the stages in flight must hold several round trips
  // of the path for the link to stay busy.
  const double round_trips = path.loss > 1e-3 ? 6 : 4;
  const double stages = std::ceil(round_trips * rtt * rate / static_cast<double>(step_bytes));
  return std::clamp<std::size_t>(kLeast + static_cast<std::size_t>(std::min(stages, 1e6)), kLeast, kMost);
}

bool prefers_latency_path(const Plan::Pricing& pricing, CollectiveKind kind, std::size_t bytes) {
  if (bytes > pricing.small_bytes) return false;
  const auto& levels = pricing.levels;
  const double n = static_cast<double>(bytes);
  const topology::Cost latency = latency_cost(levels, kind, n);
  // Only while latency bounds it: a bandwidth-bound whole message on one rail's WAN
  // stream measured up to 1.7x slower than the model says (a TCP window opening again
  // after idle), where the pipeline spreads the same bytes over every rail's streams.
  if (latency.beta > latency.total() / 2) return false;
  return latency.total() <= pipeline_cost(levels, kind, n).total();
}

topology::Cost predict_plan(const topology::Selector& sel, const Plan& plan, CollectiveKind kind, double bytes) {
  const Plan::Pricing pricing = plan.pricing ? *plan.pricing : price_levels(sel, plan);
  const auto& levels = pricing.levels;
  if (plan.kind == Plan::Kind::leader) return topology::predict_leader(kind, levels, bytes);
  return prefers_latency_path(pricing, kind, static_cast<std::size_t>(bytes)) ? latency_cost(levels, kind, bytes)
                                                                              : pipeline_cost(levels, kind, bytes);
}

CompressedPrediction predict_compressed_plan(const topology::Selector& sel, const Plan& plan, const quant::Codec& codec,
                                             double bytes, std::optional<collectives::EncodedExchange> how) {
  const Plan::Pricing pricing = plan.pricing ? *plan.pricing : price_levels(sel, plan);
  const auto& levels = pricing.levels;
  CompressedPrediction out;
  if (levels.empty()) return out;
  const bool split = plan.kind == Plan::Kind::split_rail;
  const topology::Descent d = split ? topology::split_rail_descent(levels, bytes)
                                    : topology::leader_descent(CollectiveKind::allreduce, levels, bytes);
  const int p = levels.back().size;
  const auto n = static_cast<std::size_t>(d.top_bytes / sizeof(float));
  collectives::EncodedShape shape = quant::encoded_shape(codec, n);
  // Every rail crosses at once (as split_rail_compressed_allreduce tells the chooser).
  shape.sharing = split ? static_cast<double>(plan.world_size) / std::max(1, p) : 1;
  out.exchange = how ? *how : sel.encoded_exchange(plan.mine.back(), shape);
  out.cost = d.cost + topology::predict_compressed(out.exchange, p, shape, levels.back().cost);
  out.top_bytes = d.top_bytes;
  const double q = p;
  out.wan_bytes = p < 2 ? 0
                  : out.exchange == collectives::EncodedExchange::gather || p == 2
                      ? (q - 1) * shape.encoded_bytes
                      : 2 * (q - 1) / q * shape.encoded_bytes;
  out.exact_wan_bytes = 2 * (q - 1) / q * d.top_bytes;
  return out;
}

}  // namespace strata::hierarchy
