// A two-layer perceptron (inputs -> hidden ReLU -> classes, softmax cross-entropy) with a
// hand-written backward pass and SGD with momentum: small enough to train in seconds on
// a laptop core, big enough (~100k parameters) that keeping 1% of a gradient is a real
// compression.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::convergence {

struct MlpShape {
  int inputs = 128;
  int hidden = 768;
  int classes = 10;
};

// w1 is inputs x hidden and w2 hidden x outputs (input-major) so that both passes run
// their long loops over contiguous rows, which the compiler vectorises.
struct MlpTensors {
  std::vector<float> w1, b1, w2, b2;

  // The tensors in a fixed order with the names the allreduce keys use.
  std::array<std::pair<const char*, std::vector<float>*>, 4> named() {
    return {{{"w1", &w1}, {"b1", &b1}, {"w2", &w2}, {"b2", &b2}}};
  }
  std::array<std::pair<const char*, const std::vector<float>*>, 4> named() const {
    return {{{"w1", &w1}, {"b1", &b1}, {"w2", &w2}, {"b2", &b2}}};
  }
};

struct BatchStats {
  double loss_sum = 0;  // summed over the batch, so shards add up across ranks
  double correct = 0;
};

class Mlp {
 public:
  Mlp(const MlpShape& shape, std::uint64_t seed);

  const MlpShape& shape() const { return shape_; }
  std::size_t parameter_count() const;

  // Gradient of (sum of the batch's losses) * scale into grad, overwriting it: with scale
  // 1/n_local the ranks' gradients average to the global batch's mean gradient.
  BatchStats train_batch(const float* x, const int* y, int n, float scale, MlpTensors& grad);
  BatchStats evaluate(const float* x, const int* y, int n);

  // Heavy-ball momentum: v = momentum * v + g; w -= lr * v.
  void sgd_step(const MlpTensors& grad, float lr, float momentum);

  MlpTensors zeros_like() const;
  // Order-dependent digest of every parameter bit: equal on all ranks iff they agree.
  std::uint64_t digest() const;

 private:
  BatchStats forward(const float* x, const int* y, int n);

  MlpShape shape_;
  MlpTensors w_, velocity_;
  std::vector<float> hidden_, probs_, dhidden_;  // per batch scratch
};

}  // namespace strata::convergence
