// Gradient codecs for the region level: what crosses the WAN when compression is on.
//
// A codec turns a dense f32 span into a self-describing byte buffer (a 24-byte header, then
// the payload), so a receiver decodes it with no side information and a corrupt or
// truncated buffer is caught by its lengths rather than read past. Dense codecs cast or
// block-quantize every element; top-k codecs keep about density * n elements and send their
// values (themselves optionally cast or quantized) with their indices.
//
// Spec grammar (parse_codec), case-sensitive, no spaces:
//
//   spec    := dense | topk
//   dense   := "none" | "fp16" | "bf16" | ("int8" | "int4") [",stochastic"]
//   topk    := "topk:" density ["+" value] ("," option)*
//   value   := "fp16" | "bf16" | "int8" | "int4"          (default: f32 values)
//   option  := "sampled" | "exact" | "stochastic"          (each at most once)
//   density := a decimal in (0, 1], e.g. 0.01 or 1e-3
//
// "sampled" (the default) picks the top-k threshold from a ~1% sample in O(n) and keeps
// between 0.9k and k elements; "exact" keeps exactly k. "stochastic" rounds int8/int4
// values stochastically and is rejected for other value types. Block size is not part of
// the grammar: CodecSpec::block (default 256) sets it.
//
// Determinism: encode is a pure function of (spec, input, seed), and decode of the bytes,
// on every CPU strata supports; ranks that decode the same buffer get the same bits.
// Non-finite inputs: a NaN or infinity makes its quantization block decode to NaN; top-k
// always keeps NaNs (they order above infinity), so they surface rather than hide in a
// residual.
//
// Thread-safety: codec objects are immutable; encode keeps per-thread scratch, so any
// number of threads may encode and decode concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::quant {

enum class Sparsity : std::uint8_t { dense = 0, topk = 1 };
// How element values are stored: raw, cast, or block-quantized with one f32 scale per block.
enum class ValueCoding : std::uint8_t { f32 = 0, fp16 = 1, bf16 = 2, int8 = 3, int4 = 4 };
enum class TopkSelect : std::uint8_t { sampled = 0, exact = 1 };
// The top-k index section's first byte says which of the two encodings follows.
enum class IndexCoding : std::uint8_t { delta_varint = 0, bitmap = 1 };

inline constexpr std::uint32_t kDefaultBlock = 256;
inline constexpr std::uint32_t kMaxBlock = 1u << 24;

struct CodecSpec {
  Sparsity sparsity = Sparsity::dense;
  ValueCoding values = ValueCoding::f32;
  double density = 1.0;  // top-k only: fraction of elements kept, in (0, 1]
  TopkSelect select = TopkSelect::sampled;
  bool stochastic = false;  // int8/int4 only
  std::uint32_t block = kDefaultBlock;  // int8/int4 only: elements per scale, 1..kMaxBlock

  bool operator==(const CodecSpec&) const = default;
};

// Throws strata::InvalidArgument naming the offending token.
CodecSpec parse_codec(std::string_view text);
// Canonical spelling; parse_codec(to_string(s)) == s for any spec with the default block.
std::string to_string(const CodecSpec& spec);
const char* to_string(ValueCoding v);
const char* to_string(IndexCoding c);
// Throws InvalidArgument if the combination is not one the grammar can express or the
// block size is out of range.
void validate(const CodecSpec& spec);

// Elements a top-k codec keeps for n inputs: round(density * n), at least 1 when n > 0.
std::size_t topk_count(double density, std::size_t n);

inline constexpr std::size_t kWireHeaderBytes = 24;

// What the header of an encoded buffer says; read_header validates it against the buffer
// length, so every size below is consistent with the bytes that follow.
struct WireHeader {
  Sparsity sparsity;
  ValueCoding values;
  std::uint32_t block;  // 0 unless values is int8/int4
  std::uint64_t n;      // dense elements the buffer decodes to
  std::uint64_t k;      // elements carried (n for dense codecs)
};
WireHeader read_header(std::span<const std::byte> wire);

// Decode any strata-encoded buffer. out/accum must hold exactly header.n elements.
// Everything is validated before the first write, so a throw leaves the output untouched.
void decode(std::span<const std::byte> wire, std::span<float> out);
void decode_add(std::span<const std::byte> wire, std::span<float> accum);
// A top-k buffer's kept elements (indices ascending, decoded values), validated like
// decode; false for a dense buffer. Lets callers touch only k elements where a dense
// decode would write n.
bool decode_sparse(std::span<const std::byte> wire, std::vector<std::uint32_t>& idx,
                   std::vector<float>& values);

class Codec {
 public:
  virtual ~Codec() = default;

  const CodecSpec& spec() const { return spec_; }
  bool lossy() const;
  // Size of encode's output for n elements: exact for dense codecs; for top-k it assumes k
  // elements and the index section that randomly placed indices would take.
  virtual std::size_t expected_wire_bytes(std::size_t n) const = 0;
  // Never exceeded by encode; size output buffers with it.
  virtual std::size_t max_wire_bytes(std::size_t n) const = 0;

  // Encodes in into out (at least max_wire_bytes(in.size()) bytes) and returns the bytes
  // written. seed drives stochastic rounding only: the same seed reproduces the same bytes.
  virtual std::size_t encode(std::span<const float> in, std::span<std::byte> out,
                             std::uint64_t seed = 0) const = 0;
  // Convenience: resizes out to the encoded length (capacity is reused across calls).
  void encode(std::span<const float> in, std::vector<std::byte>& out,
              std::uint64_t seed = 0) const;

  // As the free functions, and also reject buffers produced by a different kind of codec.
  void decode(std::span<const std::byte> wire, std::span<float> out) const;
  void decode_add(std::span<const std::byte> wire, std::span<float> accum) const;

 protected:
  explicit Codec(const CodecSpec& spec) : spec_(spec) {}

 private:
  CodecSpec spec_;
};

// Validates the spec and builds its codec.
std::unique_ptr<Codec> make_codec(const CodecSpec& spec);
inline std::unique_ptr<Codec> make_codec(std::string_view text) {
  return make_codec(parse_codec(text));
}

}  // namespace strata::quant
