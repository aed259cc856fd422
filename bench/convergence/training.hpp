// One data-parallel training run through a strata communicator: every rank computes the
// gradient of its shard of each global batch, the gradients are averaged with one
// allreduce per parameter tensor (compressed or not), and every rank applies the same
// update, so the replicas stay bit-identical.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlp.hpp"
#include "strata/strata.hpp"
#include "teacher_task.hpp"

namespace strata::convergence {

struct TrainConfig {
  MlpShape shape;
  int steps = 2000;
  int global_batch = 128;  // split evenly over the ranks
  // One setting for every run, picked by sweeping a few (README lists them and what the
  // compressed runs did under each).
  float lr = 0.1f;
  float momentum = 0.5f;
  double warmup = 0.05;  // fraction of steps with a linear ramp, then cosine decay to zero
  int eval_every = 25;
  std::uint64_t init_seed = 1;
};

struct RunSpec {
  std::string name;
  std::optional<Compression> compression;  // nullopt: exact allreduce
};

struct StepRecord {
  int step = 0;
  double train_loss = 0;  // mean over the global batch, before this step's update
  std::optional<double> heldout_loss, heldout_accuracy;
};

struct RunResult {
  std::string name;
  std::vector<StepRecord> records;
  double seconds = 0;
  double wan_bytes_per_step = 0;  // payload this rank sent over the WAN link, per step
};

float learning_rate(const TrainConfig& cfg, int step);

// Collective: every rank must call it with the same arguments. Records are complete on
// every rank (the losses are allreduced). Throws if the replicas diverge.
RunResult train(Communicator& comm, TeacherTask& task, const TrainConfig& cfg, const RunSpec& run);

}  // namespace strata::convergence
