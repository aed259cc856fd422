#include "quant/error_feedback.hpp"

#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

#include "strata/errors.hpp"

namespace strata::quant {
namespace {

// Snapshot layout, little-endian:
//   "SQEF"  u32 version  u64 entries
//   per entry: u32 key bytes, key, u64 offset, u64 length, length x f32
//   u64 checksum of everything before it
constexpr char kMagic[4] = {'S', 'Q', 'E', 'F'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kFixedBytes = 4 + 4 + 8 + 8;
static_assert(std::endian::native == std::endian::little);

std::string describe(std::string_view key, Shard s) {
  std::string out = "'";
  out.append(key).append("' [").append(std::to_string(s.offset));
  out.append(", +").append(std::to_string(s.length)).append(")");
  return out;
}

}  // namespace

// Word-at-a-time multiply-rotate hash: detects corruption at memory speed, which matters
// for residuals the size of a model shard. Not a defence against tampering.
std::uint64_t snapshot_checksum(const std::byte* p, std::size_t n) {
  std::uint64_t h = 0x243f6a8885a308d3ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = std::rotl(h ^ w, 29) * 0x9e3779b97f4a7c15ull;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  h = std::rotl(h ^ tail, 29) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 31);
}

namespace {

// Finds the residual stored for exactly this shard; throws if the shard overlaps another.
template <class Shards>
auto find_shard(Shards& shards, std::string_view key, Shard s) -> decltype(shards.begin()) {
  auto it = shards.lower_bound(s.offset);
  if (it != shards.end() && it->first == s.offset && it->second.size() == s.length) return it;
  const auto clash = [&](std::uint64_t off, std::size_t len) {
    throw InvalidArgument("quant: error feedback shard " + describe(key, s) +
                          " overlaps the stored shard " + describe(key, Shard{off, len}) +
                          "; call reset('" + std::string(key) + "') after changing the layout");
  };
  if (it != shards.end() && it->first < s.offset + s.length) clash(it->first, it->second.size());
  if (it != shards.begin()) {
    const auto prev = std::prev(it);
    if (prev->first + prev->second.size() > s.offset) clash(prev->first, prev->second.size());
  }
  return shards.end();
}

void check_shard(std::string_view key, Shard s, std::size_t size, const char* what) {
  if (s.length != size) {
    throw InvalidArgument(std::string("quant: error feedback ") + what + " of shard " +
                          describe(key, s) + " got " + std::to_string(size) + " elements");
  }
  if (s.offset > std::numeric_limits<std::uint64_t>::max() - s.length) {
    throw InvalidArgument("quant: error feedback shard " + describe(key, s) + " overflows");
  }
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  const std::byte* take(std::uint64_t n, const char* what) {
    need(n, what);
    const std::byte* p = b_.data() + pos_;
    pos_ += static_cast<std::size_t>(n);
    return p;
  }
  std::size_t left() const { return b_.size() - pos_; }

 private:
  void need(std::uint64_t n, const char* what) {
    if (n > left()) {
      throw InvalidArgument(std::string("quant: error feedback snapshot truncated in ") + what);
    }
  }
  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
};

}  // namespace

void ErrorFeedback::compensate(std::string_view key, Shard shard, std::span<float> data) const {
  check_shard(key, shard, data.size(), "compensate");
  if (shard.length == 0) return;
  const auto k = store_.find(key);
  if (k == store_.end()) return;
  const auto it = find_shard(k->second, key, shard);
  if (it == k->second.end()) return;
  const float* r = it->second.data();
  for (std::size_t i = 0; i < data.size(); ++i) data[i] += r[i];
}

void ErrorFeedback::update(std::string_view key, Shard shard, std::span<const float> sent,
                           std::span<const float> decoded) {
  check_shard(key, shard, sent.size(), "update (sent)");
  check_shard(key, shard, decoded.size(), "update (decoded)");
  if (shard.length == 0) return;
  auto k = store_.find(key);
  if (k == store_.end()) k = store_.emplace(std::string(key), Shards{}).first;
  auto it = find_shard(k->second, key, shard);
  if (it == k->second.end()) {
    it = k->second.emplace(shard.offset, std::vector<float>(shard.length)).first;
  }
  float* r = it->second.data();
  for (std::size_t i = 0; i < sent.size(); ++i) r[i] = sent[i] - decoded[i];
}

void ErrorFeedback::update_sparse(std::string_view key, Shard shard, std::span<const float> sent,
                                  std::span<const std::uint32_t> idx, std::span<const float> values) {
  check_shard(key, shard, sent.size(), "update (sent)");
  if (idx.size() != values.size())
    throw InvalidArgument("error feedback: " + std::to_string(idx.size()) + " indices but " +
                          std::to_string(values.size()) + " values");
  for (const auto i : idx)
    if (i >= sent.size())
      throw InvalidArgument("error feedback: index " + std::to_string(i) + " is outside a shard of " +
                            std::to_string(sent.size()));
  if (shard.length == 0) return;
  auto k = store_.find(key);
  if (k == store_.end()) k = store_.emplace(std::string(key), Shards{}).first;
  auto it = find_shard(k->second, key, shard);
  if (it == k->second.end()) it = k->second.emplace(shard.offset, std::vector<float>(shard.length)).first;
  float* r = it->second.data();
  std::copy(sent.begin(), sent.end(), r);
  for (std::size_t j = 0; j < idx.size(); ++j) r[idx[j]] = sent[idx[j]] - values[j];
}

void ErrorFeedback::add(std::string_view key, Shard shard, std::size_t at, std::span<const float> dropped) {
  check_shard(key, shard, shard.length, "add");
  if (at > shard.length || dropped.size() > shard.length - at)
    throw InvalidArgument("quant: error feedback add of " + std::to_string(dropped.size()) + " elements at " +
                          std::to_string(at) + " runs past shard " + describe(key, shard));
  if (dropped.empty()) return;
  auto k = store_.find(key);
  if (k == store_.end()) k = store_.emplace(std::string(key), Shards{}).first;
  auto it = find_shard(k->second, key, shard);
  if (it == k->second.end()) it = k->second.emplace(shard.offset, std::vector<float>(shard.length)).first;
  float* r = it->second.data() + at;
  for (std::size_t i = 0; i < dropped.size(); ++i) r[i] += dropped[i];
}

void ErrorFeedback::reset(std::string_view key) {
  const auto k = store_.find(key);
  if (k != store_.end()) store_.erase(k);
}

void ErrorFeedback::reset_all() { store_.clear(); }

std::span<const float> ErrorFeedback::residual(std::string_view key, Shard shard) const {
  const auto k = store_.find(key);
  if (k == store_.end()) return {};
  const auto it = k->second.find(shard.offset);
  if (it == k->second.end() || it->second.size() != shard.length) return {};
  return it->second;
}

std::size_t ErrorFeedback::entries() const {
  std::size_t n = 0;
  for (const auto& [key, shards] : store_) n += shards.size();
  return n;
}

std::size_t ErrorFeedback::residual_elements() const {
  std::size_t n = 0;
  for (const auto& [key, shards] : store_) {
    for (const auto& [off, r] : shards) n += r.size();
  }
  return n;
}

std::vector<std::byte> ErrorFeedback::save() const {
  std::size_t size = kFixedBytes;
  for (const auto& [key, shards] : store_) {
    for (const auto& [off, r] : shards) size += 4 + key.size() + 16 + 4 * r.size();
  }
  std::vector<std::byte> out(size);
  std::byte* p = out.data();
  const auto put = [&p](const void* v, std::size_t n) {
    std::memcpy(p, v, n);
    p += n;
  };
  const std::uint64_t count = entries();
  put(kMagic, 4);
  put(&kVersion, 4);
  put(&count, 8);
  for (const auto& [key, shards] : store_) {
    for (const auto& [off, r] : shards) {
      const auto klen = static_cast<std::uint32_t>(key.size());
      const std::uint64_t len = r.size();
      put(&klen, 4);
      put(key.data(), key.size());
      put(&off, 8);
      put(&len, 8);
      put(r.data(), 4 * r.size());
    }
  }
  const std::uint64_t sum = snapshot_checksum(out.data(), size - 8);
  put(&sum, 8);
  return out;
}

void ErrorFeedback::restore(std::span<const std::byte> bytes) {
  const auto fail = [](const std::string& what) {
    throw InvalidArgument("quant: bad error feedback snapshot: " + what);
  };
  if (bytes.size() < kFixedBytes) fail("only " + std::to_string(bytes.size()) + " bytes");
  if (std::memcmp(bytes.data(), kMagic, 4) != 0) fail("not a snapshot (bad magic)");
  std::uint32_t version;
  std::memcpy(&version, bytes.data() + 4, 4);
  if (version != kVersion) {
    fail("version " + std::to_string(version) + ", this build reads version " +
         std::to_string(kVersion));
  }
  std::uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (sum != snapshot_checksum(bytes.data(), bytes.size() - 8)) fail("checksum mismatch");

  Reader in(bytes.first(bytes.size() - 8));
  in.take(8, "header");
  const auto count = in.get<std::uint64_t>("header");
  decltype(store_) fresh;
  for (std::uint64_t e = 0; e < count; ++e) {
    const auto klen = in.get<std::uint32_t>("an entry's key length");
    const std::byte* kp = in.take(klen, "an entry's key");
    const std::string key(reinterpret_cast<const char*>(kp), klen);
    const Shard s{in.get<std::uint64_t>("an entry's offset"), in.get<std::uint64_t>("an entry's length")};
    if (s.length == 0 || s.length > in.left() / 4) {
      fail("entry " + std::to_string(e) + " claims " + std::to_string(s.length) + " elements");
    }
    if (s.offset > std::numeric_limits<std::uint64_t>::max() - s.length) {
      fail("entry " + describe(key, s) + " overflows");
    }
    auto& shards = fresh[key];
    bool repeats = false;
    try {
      repeats = find_shard(shards, key, s) != shards.end();
    } catch (const InvalidArgument&) {
      repeats = true;
    }
    if (repeats) fail("entry " + describe(key, s) + " repeats or overlaps an earlier one");
    std::vector<float> r(static_cast<std::size_t>(s.length));
    std::memcpy(r.data(), in.take(4 * s.length, "residual values"), 4 * r.size());
    shards.emplace(s.offset, std::move(r));
  }
  if (in.left() != 0) fail(std::to_string(in.left()) + " stray bytes after the last entry");
  store_.swap(fresh);
}

}  // namespace strata::quant
