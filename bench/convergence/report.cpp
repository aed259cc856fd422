#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace strata::convergence {

namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::size_t tail_steps(const RunResult& r, double tail) {
  const auto n = r.records.size();
  return std::clamp<std::size_t>(static_cast<std::size_t>(static_cast<double>(n) * tail), 1, std::max<std::size_t>(n, 1));
}

}  // namespace

double final_loss(const RunResult& r, double tail) {
  if (r.records.empty()) return 0;
  const std::size_t k = tail_steps(r, tail);
  double s = 0;
  for (std::size_t i = r.records.size() - k; i < r.records.size(); ++i) s += r.records[i].train_loss;
  return s / static_cast<double>(k);
}

const StepRecord* last_evaluation(const RunResult& r) {
  for (auto it = r.records.rbegin(); it != r.records.rend(); ++it)
    if (it->heldout_accuracy) return &*it;
  return nullptr;
}

void write_csv(std::ostream& out, const std::vector<RunResult>& runs) {
  out << "step,run,train_loss,heldout_loss,heldout_accuracy\n";
  for (const auto& r : runs)
    for (const auto& rec : r.records) {
      // Blank held-out columns on the steps between evaluations keep the file rectangular.
      out << rec.step << ',' << r.name << ',' << format("%.6f", rec.train_loss) << ','
          << (rec.heldout_loss ? format("%.6f", *rec.heldout_loss) : "") << ','
          << (rec.heldout_accuracy ? format("%.4f", *rec.heldout_accuracy) : "") << '\n';
    }
}

void print_summary(std::ostream& out, const std::vector<RunResult>& runs, double tail,
                   const std::string& target_run, double target) {
  if (runs.empty()) return;
  const double base = final_loss(runs.front(), tail);
  const auto steps = runs.front().records.size();
  out << "# final loss: mean training loss of the last " << tail_steps(runs.front(), tail) << " of " << steps
      << " steps; ratio to " << runs.front().name << '\n';
  for (const auto& r : runs) {
    const double loss = final_loss(r, tail);
    const StepRecord* eval = last_evaluation(r);
    char line[256];
    std::snprintf(line, sizeof line,
                  "run %-18s final_loss %.5f  ratio %.4f  heldout_loss %.5f  heldout_acc %.4f  "
                  "wan_bytes/step/rank %.0f  time %.1fs\n",
                  r.name.c_str(), loss, base > 0 ? loss / base : 0.0, eval ? *eval->heldout_loss : 0.0,
                  eval ? *eval->heldout_accuracy : 0.0, r.wan_bytes_per_step, r.seconds);
    out << line;
  }
  for (const auto& r : runs) {
    if (r.name != target_run || &r == &runs.front()) continue;
    const double ratio = base > 0 ? final_loss(r, tail) / base : 0.0;
    out << "target: " << r.name << " within " << format("%.0f", target * 100) << "% of " << runs.front().name
        << ": " << (std::abs(ratio - 1.0) <= target ? "met" : "MISSED") << " (ratio " << format("%.4f", ratio)
        << ")\n";
  }
}

}  // namespace strata::convergence
