#include "training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace strata::convergence {

namespace {

struct Shard {
  std::uint64_t begin = 0, count = 0;
};

Shard shard_of(std::uint64_t total, int rank, int size) {
  const auto r = static_cast<std::uint64_t>(rank), s = static_cast<std::uint64_t>(size);
  return {total * r / s, total * (r + 1) / s - total * r / s};
}

// Every collective names its compression explicitly, so STRATA_COMPRESS in the caller's
// environment cannot turn the exact baseline (or the loss sums) into a lossy one.
CallOptions exact() {
  CallOptions o;
  o.compression = Compression{};
  return o;
}

// Held-out loss and accuracy over the whole set, each rank evaluating its slice.
std::pair<double, double> evaluate(Communicator& comm, TeacherTask& task, Mlp& model) {
  const auto& spec = task.spec();
  const Shard mine = shard_of(spec.heldout_size, comm.rank(), comm.size());
  const auto d = static_cast<std::size_t>(spec.inputs);
  std::vector<float> x(mine.count * d);
  std::vector<int> y(mine.count);
  for (std::uint64_t i = 0; i < mine.count; ++i) y[i] = task.example(spec.train_size + mine.begin + i, &x[i * d]);
  const BatchStats st = model.evaluate(x.data(), y.data(), static_cast<int>(mine.count));
  double sums[2] = {st.loss_sum, st.correct};
  comm.allreduce(sums, sums, 2, DataType::f64, ReduceOp::sum, exact()).wait();
  const auto n = static_cast<double>(spec.heldout_size);
  return {sums[0] / n, sums[1] / n};
}

void check_replicas_agree(Communicator& comm, const Mlp& model, const std::string& run) {
  const auto mine = static_cast<std::int64_t>(model.digest());
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, all.data(), 1, DataType::i64).wait();
  if (std::any_of(all.begin(), all.end(), [&](std::int64_t v) { return v != all[0]; }))
    throw std::runtime_error("run " + run + ": model replicas differ across ranks after training");
}

}  // namespace

float learning_rate(const TrainConfig& cfg, int step) {
  const double warm = std::max(1.0, cfg.warmup * cfg.steps);
  if (step < warm) return static_cast<float>(cfg.lr * (step + 1) / warm);
  const double t = (step - warm) / std::max(1.0, cfg.steps - warm);
  return static_cast<float>(cfg.lr * 0.5 * (1.0 + std::cos(3.141592653589793 * t)));
}

RunResult train(Communicator& comm, TeacherTask& task, const TrainConfig& cfg, const RunSpec& run) {
  if (cfg.global_batch % comm.size() != 0)
    throw std::invalid_argument("global batch " + std::to_string(cfg.global_batch) +
                                " does not split evenly over " + std::to_string(comm.size()) + " ranks");
  const int local = cfg.global_batch / comm.size();
  const auto d = static_cast<std::size_t>(cfg.shape.inputs);

  // A previous run's residuals must not leak into this one.
  comm.reset_residuals();
  Mlp model(cfg.shape, cfg.init_seed);
  MlpTensors grad = model.zeros_like();
  std::vector<float> x(static_cast<std::size_t>(local) * d);
  std::vector<int> y(static_cast<std::size_t>(local));

  std::vector<CallOptions> tensor_opts;
  for (const auto& [name, t] : grad.named()) {
    CallOptions o = exact();
    if (run.compression) {
      o.compression = *run.compression;
      o.compression->key = name;
    }
    tensor_opts.push_back(o);
  }

  RunResult result;
  result.name = run.name;
  const auto wan_before = comm.traffic().wan_bytes_sent;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < cfg.steps; ++step) {
    const std::uint64_t first = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(cfg.global_batch) +
                                static_cast<std::uint64_t>(comm.rank()) * static_cast<std::uint64_t>(local);
    for (int b = 0; b < local; ++b)
      y[static_cast<std::size_t>(b)] = task.example(task.train_example_at(first + static_cast<std::uint64_t>(b)),
                                                    &x[static_cast<std::size_t>(b) * d]);
    const BatchStats st = model.train_batch(x.data(), y.data(), local, 1.0f / static_cast<float>(local), grad);

    std::vector<Work> pending;
    std::size_t t = 0;
    for (auto& [name, g] : grad.named())
      pending.push_back(comm.allreduce(g->data(), g->data(), g->size(), DataType::f32, ReduceOp::avg, tensor_opts[t++]));
    double loss_sum = st.loss_sum;
    pending.push_back(comm.allreduce(&loss_sum, &loss_sum, 1, DataType::f64, ReduceOp::sum, exact()));
    for (auto& w : pending) w.wait();

    model.sgd_step(grad, learning_rate(cfg, step), cfg.momentum);
    StepRecord rec;
    rec.step = step;
    rec.train_loss = loss_sum / cfg.global_batch;
    if ((step + 1) % cfg.eval_every == 0 || step + 1 == cfg.steps) {
      const auto [loss, acc] = evaluate(comm, task, model);
      rec.heldout_loss = loss;
      rec.heldout_accuracy = acc;
    }
    if (!std::isfinite(rec.train_loss))
      throw std::runtime_error("run " + run.name + ": training loss is not finite at step " + std::to_string(step));
    result.records.push_back(rec);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.wan_bytes_per_step =
      static_cast<double>(comm.traffic().wan_bytes_sent - wan_before) / std::max(cfg.steps, 1);
  check_replicas_agree(comm, model, run.name);
  return result;
}

}  // namespace strata::convergence
