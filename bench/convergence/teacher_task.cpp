#include "teacher_task.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "random.hpp"

namespace strata::convergence {

namespace {

// Distinct purposes keep the streams independent even for equal indices.
enum Purpose : std::uint64_t { kTeacher = 1, kExample = 2, kEpoch = 3 };

}  // namespace

TeacherTask::TeacherTask(const TaskSpec& spec) : spec_(spec) {
  if (spec.train_size == 0 || spec.train_size > 0xFFFFFFFFull)
    throw std::invalid_argument("train_size must be in [1, 2^32)");
  const int d = spec.inputs, t = spec.teacher_hidden, c = spec.classes;
  Rng rng(stream_id(spec.seed, kTeacher, 0));
  // Unit-variance pre-activations keep tanh out of saturation, so the decision
  // boundaries are curved but smooth.
  w1_.resize(static_cast<std::size_t>(t) * d);
  for (auto& w : w1_) w = rng.normal() / std::sqrt(d);
  b1_.resize(static_cast<std::size_t>(t));
  for (auto& b : b1_) b = 0.5 * rng.normal();
  w2_.resize(static_cast<std::size_t>(c) * t);
  for (auto& w : w2_) w = rng.normal() / std::sqrt(t);
}

void TeacherTask::teacher_probabilities(const float* x, double* p) const {
  const int d = spec_.inputs, t = spec_.teacher_hidden, c = spec_.classes;
  std::vector<double> h(static_cast<std::size_t>(t));
  for (int j = 0; j < t; ++j) {
    double s = b1_[static_cast<std::size_t>(j)];
    for (int k = 0; k < d; ++k) s += w1_[static_cast<std::size_t>(j) * d + k] * x[k];
    h[static_cast<std::size_t>(j)] = std::tanh(s);
  }
  double top = -1e300;
  for (int i = 0; i < c; ++i) {
    double s = 0;
    for (int j = 0; j < t; ++j) s += w2_[static_cast<std::size_t>(i) * t + j] * h[static_cast<std::size_t>(j)];
    p[i] = spec_.sharpness * s;
    top = std::max(top, p[i]);
  }
  double z = 0;
  for (int i = 0; i < c; ++i) z += (p[i] = std::exp(p[i] - top));
  for (int i = 0; i < c; ++i) p[i] /= z;
}

int TeacherTask::example(std::uint64_t i, float* x) const {
  Rng rng(stream_id(spec_.seed, kExample, i));
  for (int k = 0; k < spec_.inputs; ++k) x[k] = static_cast<float>(rng.normal());
  std::vector<double> p(static_cast<std::size_t>(spec_.classes));
  teacher_probabilities(x, p.data());
  // Sampled with the example's own stream: the label noise is part of the fixed dataset,
  // identical in every run and on every rank.
  double u = rng.uniform();
  for (int c = 0; c < spec_.classes - 1; ++c) {
    u -= p[static_cast<std::size_t>(c)];
    if (u < 0) return c;
  }
  return spec_.classes - 1;
}

std::uint64_t TeacherTask::train_example_at(std::uint64_t position) {
  const std::uint64_t epoch = position / spec_.train_size;
  if (epoch != epoch_) {
    order_.resize(spec_.train_size);
    std::iota(order_.begin(), order_.end(), 0u);
    Rng rng(stream_id(spec_.seed, kEpoch, epoch));
    for (std::uint64_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng.below(i + 1)]);
    epoch_ = epoch;
  }
  return order_[position % spec_.train_size];
}

TeacherTask::Floor TeacherTask::bayes_floor() const {
  Floor f;
  std::vector<float> x(static_cast<std::size_t>(spec_.inputs));
  std::vector<double> p(static_cast<std::size_t>(spec_.classes));
  for (std::uint64_t i = 0; i < spec_.heldout_size; ++i) {
    const int y = example(spec_.train_size + i, x.data());
    teacher_probabilities(x.data(), p.data());
    f.loss -= std::log(std::max(p[static_cast<std::size_t>(y)], 1e-300));
    f.accuracy += std::max_element(p.begin(), p.end()) - p.begin() == y ? 1 : 0;
  }
  const auto n = static_cast<double>(std::max<std::uint64_t>(spec_.heldout_size, 1));
  f.loss /= n;
  f.accuracy /= n;
  return f;
}

}  // namespace strata::convergence
