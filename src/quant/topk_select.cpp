#include "quant/topk_select.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "kernels/quant.hpp"
#include "strata/errors.hpp"

namespace strata::quant {
namespace {

// A threshold above every key: nothing passes it.
constexpr std::uint32_t kAboveAll = 0x80000000u;
// Below this many elements sampling saves nothing worth its inaccuracy.
constexpr std::size_t kMinSampledN = std::size_t{1} << 15;
// Fewer sampled elements above the threshold than this and the sample cannot place it.
constexpr double kMinSampleRank = 16;
constexpr int kMaxPasses = 4;
// A surplus above k up to n / kCutRatio is cut rather than refined with another pass.
constexpr std::size_t kCutRatio = 128;
// k up to this uses a bounded heap (one pass) in the exact selector.
constexpr std::size_t kHeapMaxK = 2048;

inline std::uint32_t key_at(const float* x, std::size_t i) {
  return kernels::magnitude_key(std::bit_cast<std::uint32_t>(x[i]));
}

struct Scratch {
  std::vector<std::uint32_t> keys;
  std::vector<std::uint32_t> buf;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void check_size(std::size_t n) {
  if (n > std::numeric_limits<std::uint32_t>::max()) {
    throw InvalidArgument("quant: top-k selects from at most 2^32 - 1 elements, got " +
                          std::to_string(n));
  }
}

std::uint64_t count1(std::span<const float> x, std::uint32_t t) {
  std::uint64_t c = 0;
  kernels::count_at_least(x.data(), x.size(), &t, 1, &c);
  return c;
}

// out = ascending indices with key >= t; count must be the number of them.
void extract(std::span<const float> x, std::uint32_t t, std::uint64_t count,
             std::vector<std::uint32_t>& out) {
  out.resize(count + kernels::kExtractSlack);
  const std::size_t got = kernels::extract_at_least(x.data(), x.size(), t, 0, out.data());
  if (got != count) throw Error(ErrorCode::internal, "quant: top-k extraction count mismatch");
  out.resize(count);
}

// Keeps, in place and in index order, the k best of cand: everything above the k-th best
// key kt, then the lowest-indexed ties at kt. Candidates at or above `sure` (a threshold
// known to pass fewer than k) are kept without looking, so the selection step only runs
// over the band below it.
void cut_to_k(const float* x, std::vector<std::uint32_t>& cand, std::size_t k,
              std::uint32_t sure = kAboveAll) {
  if (cand.size() <= k) return;
  auto& band = scratch().keys;
  auto& keys = scratch().buf;
  band.clear();
  keys.resize(cand.size());
  std::size_t kept_surely = 0;
  for (std::size_t j = 0; j < cand.size(); ++j) {
    const std::uint32_t key = key_at(x, cand[j]);
    keys[j] = key;
    if (key >= sure) {
      ++kept_surely;
    } else {
      band.push_back(key);
    }
  }
  const std::size_t need = k - kept_surely;  // >= 1: fewer than k pass `sure`
  const auto kth = band.begin() + static_cast<std::ptrdiff_t>(need - 1);
  std::nth_element(band.begin(), kth, band.end(), std::greater<>());
  const std::uint32_t kt = *kth;
  std::size_t above = kept_surely;
  for (auto it = band.begin(); it != kth; ++it) above += *it > kt;
  std::size_t ties = k - above;
  std::size_t w = 0;
  for (std::size_t j = 0; j < cand.size(); ++j) {
    const std::uint32_t key = keys[j];
    if (key > kt || (key == kt && ties > 0)) {
      ties -= key == kt;
      cand[w++] = cand[j];
    }
  }
  cand.resize(w);
}

// All nonzero elements, when k asks for at least that many.
void keep_nonzero(std::span<const float> x, std::vector<std::uint32_t>& out, TopkStats* stats) {
  const std::uint64_t c = count1(x, 1);
  extract(x, 1, c, out);
  if (stats) *stats = TopkStats{1, 2, c};
}

// One pass with a bounded heap whose worst entry sets the extraction threshold, so the
// scan itself is the vectorized compare and only improvements touch the heap.
void select_heap(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& out,
                 TopkStats* stats) {
  using Entry = std::pair<std::uint32_t, std::uint32_t>;  // (key, index)
  // "a better than b": the heap's front is its worst entry.
  const auto better = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<Entry> heap;
  heap.reserve(k);
  for (std::uint32_t i = 0; i < k; ++i) heap.emplace_back(key_at(x.data(), i), i);
  std::make_heap(heap.begin(), heap.end(), better);

  constexpr std::size_t kChunk = 4096;
  auto& buf = scratch().buf;
  buf.resize(kChunk + kernels::kExtractSlack);
  for (std::size_t base = k; base < x.size(); base += kChunk) {
    const std::size_t m = std::min(kChunk, x.size() - base);
    // Later indices lose ties, so only strictly larger keys can enter.
    const std::uint32_t t = heap.front().first + 1;
    const std::size_t c = kernels::extract_at_least(x.data() + base, m, t,
                                                    static_cast<std::uint32_t>(base), buf.data());
    for (std::size_t j = 0; j < c; ++j) {
      const std::uint32_t key = key_at(x.data(), buf[j]);
      if (key <= heap.front().first) continue;
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = Entry{key, buf[j]};
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  out.clear();
  for (const Entry& e : heap) {
    if (e.first != 0) out.push_back(e.second);
  }
  std::sort(out.begin(), out.end());
  if (stats) *stats = TopkStats{heap.front().first, 1, heap.size()};
}

// A threshold and how many elements pass it.
struct Point {
  std::uint32_t t;
  std::uint64_t c;
  bool known;
};

// Next thresholds strictly inside (lo.t, hi.t), taken from the sample keys there: they are
// values the data actually holds (so ties are stepped over whole), and their ranks inside
// the bracket interpolate the count between hi.c and lo.c. Returns how many (0: the sample
// cannot resolve the bracket any further).
int refine(const std::vector<std::uint32_t>& sample, const Point& lo, const Point& hi, double k,
           std::uint32_t* t) {
  auto& in = scratch().buf;
  in.clear();
  for (const std::uint32_t v : sample) {
    if (v > lo.t && v < hi.t) in.push_back(v);
  }
  std::sort(in.begin(), in.end(), std::greater<>());
  in.erase(std::unique(in.begin(), in.end()), in.end());
  const auto m = static_cast<double>(in.size());
  if (in.empty()) return 0;
  if (in.size() <= 4) {
    std::copy(in.begin(), in.end(), t);
    return static_cast<int>(in.size());
  }
  // in[j] is estimated to pass hi.c + (j + 1) / (m + 1) * (lo.c - hi.c) elements.
  const double frac = (1.03 * k - static_cast<double>(hi.c)) /
                      (static_cast<double>(lo.c) - static_cast<double>(hi.c));
  const double center = frac * (m + 1) - 1;
  const double step = std::max(1.0, m / 10);
  int nt = 0;
  for (const double d : {-1.5, -0.5, 0.5, 1.5}) {
    const auto j = static_cast<std::size_t>(std::clamp(std::round(center + d * step), 0.0, m - 1));
    if (nt > 0 && in[j] == t[nt - 1]) continue;
    t[nt++] = in[j];
  }
  return nt;
}

// Exact selection for inputs too small to sample: nth_element over all keys.
void select_nth(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& out,
                TopkStats* stats) {
  auto& keys = scratch().keys;
  keys.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) keys[i] = key_at(x.data(), i);
  const auto kth = keys.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(keys.begin(), kth, keys.end(), std::greater<>());
  const std::uint32_t kt = *kth;
  if (kt == 0) return keep_nonzero(x, out, stats);
  const std::uint64_t c = count1(x, kt);
  extract(x, kt, c, out);
  cut_to_k(x.data(), out, k);
  if (stats) *stats = TopkStats{kt, 3, c};
}

// The threshold search shared by both selectors (n >= kMinSampledN, 0 < k < n). Counting
// passes test up to four thresholds each, keeping a bracket: lo passes >= k elements, hi
// fewer. It stops at a lo whose surplus is small (within tolerance, or cheaper to cut than
// another pass: n / kCutRatio) or, when approximate counts are allowed, at a hi within
// tolerance below k.
void threshold_search(std::span<const float> x, std::size_t k, bool exact,
                      std::vector<std::uint32_t>& out, TopkStats* stats) {
  const std::size_t n = x.size();
  const std::size_t s = std::clamp<std::size_t>(n / 100, 4096, n / 8);
  const double rank = static_cast<double>(k) * static_cast<double>(s) / static_cast<double>(n);

  // One element from each of s equal strides, at a hashed offset within the stride so that
  // a period in the data (matrix rows) cannot line up with the sampling.
  auto& sample = scratch().keys;
  sample.resize(s);
  const std::size_t stride = n / s;
  for (std::size_t j = 0; j < s; ++j) {
    const std::size_t off = (static_cast<std::uint32_t>(j) * 0x9e3779b1u >> 7) % stride;
    sample[j] = key_at(x.data(), j * stride + off);
  }

  Point lo{1, n, false};  // count unknown until measured
  Point hi{kAboveAll, 0, true};
  const double kd = static_cast<double>(k);
  const double tol_hi = (1 + kSampledTolerance) * kd;
  const double tol_lo = (1 - kSampledTolerance) * kd;

  // First guesses, as multiples of the sample rank that estimates k: one well below k, so
  // that hi is known and the final cut only sorts out the band between hi and lo, and
  // three just above (a surplus is cut away exactly, a shortfall is not made up), spread
  // by sd, the sample estimate's relative standard deviation 1/sqrt(rank).
  std::uint32_t t[4];
  int nt = 4;
  {
    const double sd = 1 / std::sqrt(std::max(rank, 1.0));
    const double mult[4] = {1 - std::max(2.5 * sd, 0.02), 1 + 0.5 * sd, 1.03 + sd, 1.03 + 2.5 * sd};
    std::size_t ranks[4];
    for (int j = 0; j < 4; ++j) {
      ranks[j] = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(rank * mult[j])), 1, s);
    }
    // Largest rank first, so each later nth_element works inside the previous prefix.
    auto end = sample.end();
    for (int j = 3; j >= 0; --j) {
      const auto it = sample.begin() + static_cast<std::ptrdiff_t>(ranks[j] - 1);
      if (it < end) std::nth_element(sample.begin(), it, end, std::greater<>());
      t[j] = std::max<std::uint32_t>(*it, 1);
      end = it;
    }
  }

  int passes = 0;
  Point final{0, 0, false};
  while (true) {
    std::uint64_t c[4];
    kernels::count_at_least(x.data(), n, t, nt, c);
    ++passes;
    for (int j = 0; j < nt; ++j) {
      if (c[j] >= k) {
        if (!lo.known || t[j] > lo.t) lo = Point{t[j], c[j], true};
      } else if (t[j] < hi.t) {
        hi = Point{t[j], c[j], true};
      }
    }
    if (lo.known && (static_cast<double>(lo.c) <= tol_hi || lo.c - k <= n / kCutRatio)) {
      final = lo;
      break;
    }
    if (!exact && static_cast<double>(hi.c) >= tol_lo) {
      final = hi;
      break;
    }
    if (passes == kMaxPasses) break;
    nt = refine(sample, lo, hi, kd, t);
    if (nt == 0) break;
  }

  if (final.t == 0) {
    // Nothing within tolerance (heavy ties, or few nonzeros): cut from the tightest
    // threshold known to pass at least k.
    if (!lo.known) {
      lo.c = count1(x, lo.t);
      ++passes;
    }
    final = lo;
  }
  extract(x, final.t, final.c, out);
  cut_to_k(x.data(), out, k, hi.t);
  if (stats) *stats = TopkStats{final.t, passes + 1, final.c};
}

}  // namespace

void select_topk_exact(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& out,
                       TopkStats* stats) {
  check_size(x.size());
  out.clear();
  if (stats) *stats = TopkStats{};
  if (k == 0 || x.empty()) return;
  if (k >= x.size()) return keep_nonzero(x, out, stats);
  if (k <= kHeapMaxK) return select_heap(x, k, out, stats);
  if (x.size() < kMinSampledN) return select_nth(x, k, out, stats);
  // Only thresholds measured to pass at least k end the search, and the cut then takes
  // exactly the best k: the sample only makes it fast.
  threshold_search(x, k, true, out, stats);
}

void select_topk_sampled(std::span<const float> x, std::size_t k,
                         std::vector<std::uint32_t>& out, TopkStats* stats) {
  check_size(x.size());
  const std::size_t n = x.size();
  out.clear();
  if (stats) *stats = TopkStats{};
  if (k == 0 || n == 0) return;
  if (k >= n) return keep_nonzero(x, out, stats);
  if (n < kMinSampledN) return select_topk_exact(x, k, out, stats);
  const double rank = static_cast<double>(k) * static_cast<double>(std::clamp<std::size_t>(n / 100, 4096, n / 8)) /
                      static_cast<double>(n);
  if (rank < kMinSampleRank) return select_topk_exact(x, k, out, stats);
  threshold_search(x, k, false, out, stats);
}

}  // namespace strata::quant
