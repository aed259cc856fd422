#include "mlp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "random.hpp"

namespace strata::convergence {

namespace {

constexpr std::uint64_t kInitPurpose = 17;

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

}  // namespace

Mlp::Mlp(const MlpShape& shape, std::uint64_t seed) : shape_(shape) {
  w_ = zeros_like();
  velocity_ = zeros_like();
  Rng rng(stream_id(seed, kInitPurpose, 0));
  // He initialisation for the ReLU layer, Glorot-like for the logits.
  const double s1 = std::sqrt(2.0 / shape.inputs), s2 = std::sqrt(1.0 / shape.hidden);
  for (auto& w : w_.w1) w = static_cast<float>(s1 * rng.normal());
  for (auto& w : w_.w2) w = static_cast<float>(s2 * rng.normal());
}

std::size_t Mlp::parameter_count() const {
  std::size_t n = 0;
  for (const auto& [name, t] : w_.named()) n += t->size();
  return n;
}

MlpTensors Mlp::zeros_like() const {
  MlpTensors t;
  t.w1.assign(sz(shape_.inputs) * sz(shape_.hidden), 0.0f);
  t.b1.assign(sz(shape_.hidden), 0.0f);
  t.w2.assign(sz(shape_.hidden) * sz(shape_.classes), 0.0f);
  t.b2.assign(sz(shape_.classes), 0.0f);
  return t;
}

BatchStats Mlp::forward(const float* x, const int* y, int n) {
  const std::size_t d = sz(shape_.inputs), h = sz(shape_.hidden), c = sz(shape_.classes);
  hidden_.resize(sz(n) * h);
  probs_.resize(sz(n) * c);
  BatchStats st;
  for (std::size_t b = 0; b < sz(n); ++b) {
    float* hb = &hidden_[b * h];
    std::copy(w_.b1.begin(), w_.b1.end(), hb);
    const float* xb = x + b * d;
    for (std::size_t k = 0; k < d; ++k) {
      const float xk = xb[k];
      const float* row = &w_.w1[k * h];
      for (std::size_t j = 0; j < h; ++j) hb[j] += xk * row[j];
    }
    for (std::size_t j = 0; j < h; ++j) hb[j] = std::max(hb[j], 0.0f);

    float* pb = &probs_[b * c];
    std::copy(w_.b2.begin(), w_.b2.end(), pb);
    for (std::size_t j = 0; j < h; ++j) {
      const float hj = hb[j];
      if (hj == 0.0f) continue;  // ReLU zeros are common; skipping them is exact
      const float* row = &w_.w2[j * c];
      for (std::size_t i = 0; i < c; ++i) pb[i] += hj * row[i];
    }
    // Log-sum-exp in double: the loss is what the experiment compares, so keep it clean.
    const float top = *std::max_element(pb, pb + c);
    double z = 0;
    for (std::size_t i = 0; i < c; ++i) z += std::exp(static_cast<double>(pb[i] - top));
    const auto label = sz(y[b]);
    st.loss_sum += std::log(z) - static_cast<double>(pb[label] - top);
    st.correct += static_cast<std::size_t>(std::max_element(pb, pb + c) - pb) == label ? 1 : 0;
    for (std::size_t i = 0; i < c; ++i) pb[i] = static_cast<float>(std::exp(static_cast<double>(pb[i] - top)) / z);
  }
  return st;
}

BatchStats Mlp::evaluate(const float* x, const int* y, int n) { return forward(x, y, n); }

BatchStats Mlp::train_batch(const float* x, const int* y, int n, float scale, MlpTensors& g) {
  const BatchStats st = forward(x, y, n);
  const std::size_t d = sz(shape_.inputs), h = sz(shape_.hidden), c = sz(shape_.classes);
  for (auto& [name, t] : g.named()) std::fill(t->begin(), t->end(), 0.0f);
  dhidden_.resize(h);
  std::vector<float> dlogits(c);
  for (std::size_t b = 0; b < sz(n); ++b) {
    const float* pb = &probs_[b * c];
    for (std::size_t i = 0; i < c; ++i) dlogits[i] = scale * (pb[i] - (i == sz(y[b]) ? 1.0f : 0.0f));
    for (std::size_t i = 0; i < c; ++i) g.b2[i] += dlogits[i];

    const float* hb = &hidden_[b * h];
    for (std::size_t j = 0; j < h; ++j) {
      float* grow = &g.w2[j * c];
      const float* wrow = &w_.w2[j * c];
      float back = 0;
      for (std::size_t i = 0; i < c; ++i) {
        grow[i] += hb[j] * dlogits[i];
        back += wrow[i] * dlogits[i];
      }
      dhidden_[j] = hb[j] > 0.0f ? back : 0.0f;
      g.b1[j] += dhidden_[j];
    }
    const float* xb = x + b * d;
    for (std::size_t k = 0; k < d; ++k) {
      const float xk = xb[k];
      float* grow = &g.w1[k * h];
      for (std::size_t j = 0; j < h; ++j) grow[j] += xk * dhidden_[j];
    }
  }
  return st;
}

void Mlp::sgd_step(const MlpTensors& grad, float lr, float momentum) {
  const auto gs = grad.named();
  const auto vs = velocity_.named();
  const auto ws = w_.named();
  for (std::size_t t = 0; t < ws.size(); ++t) {
    const auto& gt = *gs[t].second;
    auto& vt = *vs[t].second;
    auto& wt = *ws[t].second;
    for (std::size_t i = 0; i < wt.size(); ++i) {
      vt[i] = momentum * vt[i] + gt[i];
      wt[i] -= lr * vt[i];
    }
  }
}

std::uint64_t Mlp::digest() const {
  std::uint64_t h = 0;
  for (const auto& [name, t] : w_.named())
    for (const float v : *t) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h = mix64(h ^ bits);
    }
  return h;
}

}  // namespace strata::convergence
