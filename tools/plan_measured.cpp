#include "plan_measured.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>

#include "core/config.hpp"
#include "collectives/registry.hpp"
#include "hierarchy/plan_cost.hpp"
#include "plan_format.hpp"
#include "strata/errors.hpp"
#include "topology/cost_model.hpp"

namespace strata::plan_tool {

namespace {

namespace topo = strata::topology;

struct Sample {
  std::string collective;  // nccl-tests name
  int ranks = 0;
  std::uint64_t size = 0;
  std::string algorithm;   // "" for the automatic choice
  std::vector<double> us;  // out-of-place and in-place times of every file
};

void read_measured(const std::string& path, std::map<std::tuple<std::string, int, std::uint64_t, std::string>, Sample>& into) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--measured: cannot read " + path);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) throw InvalidArgument("--measured: " + path + " is not JSON");
  try {
    const std::string collective = doc.at("collective").get<std::string>();
    const int ranks = doc.at("ranks").get<int>();
    for (const auto& r : doc.at("results")) {
      // Runs without --algo have no algorithm field: the library chose.
      const std::string algorithm = r.value("algorithm", std::string());
      const auto size = r.at("size").get<std::uint64_t>();
      auto& s = into[{collective, ranks, size, algorithm}];
      s.collective = collective;
      s.ranks = ranks;
      s.size = size;
      s.algorithm = algorithm;
      for (const char* side : {"out_of_place", "in_place"}) {
        const auto& t = r.at(side).at("time");
        if (t.is_number()) s.us.push_back(t.get<double>());  // null: the run measured nothing
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("--measured: " + path + " is not a strata-perf --json document: " + e.what());
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// How often a way of choosing lands within 1.15x of the measured best.
struct Tally {
  int cases = 0, within = 0;
  double worst = 1, log_sum = 0;
  void add(double ratio) {
    ++cases;
    within += ratio <= 1.15;
    worst = std::max(worst, ratio);
    log_sum += std::log(ratio);
  }
  std::string line(const char* who) const {
    char b[200];
    std::snprintf(b, sizeof b, "%s: within 1.15x of the measured best in %d of %d (%.0f%%), worst %.2fx, geometric mean %.3fx",
                  who, within, cases, cases ? 100.0 * within / cases : 0.0, worst, cases ? std::exp(log_sum / cases) : 1.0);
    return b;
  }
};

}  // namespace

void print_measured(const topology::Selector& sel, const collectives::Group& world, const std::vector<std::string>& files,
                    bool markdown, const std::optional<hierarchy::Plan>& plan) {

  std::map<std::tuple<std::string, int, std::uint64_t, std::string>, Sample> samples;
  for (const auto& f : files) read_measured(f, samples);
  const int p = world.size();
  const topo::GroupCost cost = sel.group_cost(world);
  Tally pick_tally, threshold_tally, auto_tally;
  std::vector<double> plan_ratios;  // measured / predicted, where the plan ran (across regions)
  std::vector<std::string> misses;
  std::map<std::string, std::map<std::uint64_t, std::map<std::string, double>>> by;  // coll -> size -> algo -> us
  for (const auto& [key, s] : samples)
    if (s.ranks == p) by[s.collective][s.size][s.algorithm] = median(s.us);
  const std::string sep = markdown ? " | " : "  ";
  for (const auto& [coll, sizes] : by) {
    const auto kind = topo::parse_collective_name(coll);
    if (!kind) continue;
    std::vector<std::string> algos;
    for (const auto& a : collectives::algorithms())
      if (topo::predict(a.id, *kind, p, 1, cost)) algos.push_back(a.name);
    const bool plan_runs = plan && *kind != CollectiveKind::reduce && *kind != CollectiveKind::barrier;
    if (plan_runs) algos.push_back("hier");
    std::printf("\n%s, %d ranks: predicted / measured us (medians over runs of out-of-place and in-place)\n", coll.c_str(), p);
    std::string header = markdown ? "| size" : "      size";
    for (const auto& a : algos) header += sep + a;
    header += sep + "pick" + sep + "pick/best" + sep + "threshold/best" + sep + "auto/best" + (markdown ? " |" : "");
    std::printf("%s\n", header.c_str());
    if (markdown) {
      std::string rule = "|---:";
      for (std::size_t i = 0; i < algos.size() + 4; ++i) rule += i == algos.size() ? "|---" : "|---:";
      std::printf("%s|\n", rule.c_str());
    }
    for (const auto& [size, by_algo] : sizes) {
      const std::string sz = bytes_str(size);
      std::string line = markdown ? "| " + sz : std::string(10 - std::min<std::size_t>(10, sz.size()), ' ') + sz;
      std::string best;
      double best_us = 0;
      for (const auto& a : algos) {
        const double pred = a == "hier" ? hierarchy::predict_plan(sel, *plan, *kind, static_cast<double>(size)).total()
                                        : topo::predict(topo::find_algorithm_alias(a)->id, *kind, p, static_cast<double>(size), cost)->total();
        // Across regions the automatic runs are the plan's: a run forces an algorithm only
        // where the ranks run flat.
        const auto it = by_algo.find(a == "hier" ? "" : a);
        if (it == by_algo.end()) {
          line += sep + us(pred) + " / -";
          continue;
        }
        line += sep + us(pred) + " / " + us(it->second * 1e-6) + (std::abs(pred / (it->second * 1e-6) - 1) > 0.25 ? "*" : "");
        if (best.empty() || it->second < best_us) best = a, best_us = it->second;
        if (a == "hier") plan_ratios.push_back(it->second * 1e-6 / pred);
      }
      const std::size_t count = count_of(*kind, size, p);
      const std::string pick = plan_runs ? "hier" : sel.choose(*kind, DataType::f32, count, world).name;
      const std::string threshold =
          plan_runs ? "hier" : collectives::threshold_algorithm({*kind, nullptr, nullptr, count, DataType::f32},
                                                              static_cast<std::size_t>(config::get(config::small_bytes))).name;
      const auto pick_it = by_algo.find(pick), threshold_it = by_algo.find(threshold), auto_it = by_algo.find("");
      if (plan_runs && best == "hier" && by_algo.size() == 1) {
        std::printf("%s%shier (the plan)%s%s\n", line.c_str(), sep.c_str(), markdown ? " | | |" : "", markdown ? " |" : "");
        continue;
      }
      if (best.empty() || pick_it == by_algo.end() || threshold_it == by_algo.end()) {
        std::printf("%s%s(not every algorithm measured)\n", line.c_str(), sep.c_str());
        continue;
      }
      const double ratio = pick_it->second / best_us, threshold_ratio = threshold_it->second / best_us;
      pick_tally.add(ratio);
      threshold_tally.add(threshold_ratio);
      char tail[200];
      std::snprintf(tail, sizeof tail, "%s%s%s%.2fx%s%.2fx (%s)%s", sep.c_str(), pick.c_str(), sep.c_str(), ratio,
                    sep.c_str(), threshold_ratio, threshold.c_str(), sep.c_str());
      line += tail;
      if (auto_it != by_algo.end()) {
        // The automatic runs can beat every forced one by noise: clamp at 1 for the tally.
        const double auto_ratio = auto_it->second / best_us;
        auto_tally.add(std::max(1.0, auto_ratio));
        std::snprintf(tail, sizeof tail, "%.2fx", auto_ratio);
        line += tail;
      } else {
        line += "-";
      }
      if (ratio > 1.15) misses.push_back(coll + " " + sz + ": picked " + pick + ", measured best " + best);
      std::printf("%s%s\n", line.c_str(), markdown ? " |" : "");
    }
  }
  if (!plan_ratios.empty()) {
    std::sort(plan_ratios.begin(), plan_ratios.end());
    std::printf("\n(* = prediction off by more than 25%%)\nthe plan, %d ranks: measured / predicted median %.2f (%.2f-%.2f) over %zu size(s)\n", p,
                median(plan_ratios), plan_ratios.front(), plan_ratios.back(), plan_ratios.size());
  }
  const char* legend = plan_ratios.empty() ? "\n(* = prediction off by more than 25%)\n" : "";  // printed once
  if (pick_tally.cases == 0) {
    if (plan_ratios.empty()) std::printf("\nno measured case for %d ranks\n", p);
    return;
  }
  std::printf("%s%d ranks, choice quality\n  %s\n  %s\n", legend, p,
              pick_tally.line("selector's pick, forced runs").c_str(), threshold_tally.line("fixed threshold").c_str());
  if (auto_tally.cases) std::printf("  %s\n", auto_tally.line("automatic runs (the library choosing)").c_str());
  for (const auto& m : misses) std::printf("  miss: %s\n", m.c_str());
}

}  // namespace strata::plan_tool
