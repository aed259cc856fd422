// The public Compression option and the codec spec it stands for: one grammar
// (parse_codec), so STRATA_COMPRESS, CallOptions and strata-perf --compress agree.
#include "quant/compression.hpp"

#include "strata/errors.hpp"

namespace strata {

namespace {

using quant::ValueCoding;

Compression::Kind kind_of(ValueCoding v) {
  switch (v) {
    case ValueCoding::fp16: return Compression::Kind::fp16;
    case ValueCoding::bf16: return Compression::Kind::bf16;
    case ValueCoding::int8: return Compression::Kind::int8;
    case ValueCoding::int4: return Compression::Kind::int4;
    default: return Compression::Kind::none;
  }
}

ValueCoding coding_of(Compression::Kind k) {
  switch (k) {
    case Compression::Kind::fp16: return ValueCoding::fp16;
    case Compression::Kind::bf16: return ValueCoding::bf16;
    case Compression::Kind::int8: return ValueCoding::int8;
    case Compression::Kind::int4: return ValueCoding::int4;
    default: return ValueCoding::f32;
  }
}

}  // namespace

Compression Compression::parse(std::string_view spec) {
  const quant::CodecSpec s = quant::parse_codec(spec);
  Compression c;
  c.stochastic = s.stochastic;
  if (s.sparsity == quant::Sparsity::topk) {
    c.kind = Kind::topk;
    c.density = s.density;
    c.values = kind_of(s.values);
    c.sampled = s.select == quant::TopkSelect::sampled;
  } else {
    c.kind = kind_of(s.values);
  }
  return c;
}

std::string Compression::to_string() const { return quant::to_string(quant::codec_spec(*this)); }

}  // namespace strata

namespace strata::quant {

CodecSpec codec_spec(const Compression& c) {
  CodecSpec s;
  s.stochastic = c.stochastic;
  if (c.kind == Compression::Kind::topk) {
    if (c.values == Compression::Kind::topk)
      throw InvalidArgument("compression: topk values cannot themselves be topk");
    s.sparsity = Sparsity::topk;
    s.density = c.density;
    s.values = coding_of(c.values);
    s.select = c.sampled ? TopkSelect::sampled : TopkSelect::exact;
  } else {
    s.values = coding_of(c.kind);
  }
  validate(s);
  return s;
}

std::uint32_t compression_hash(const Compression& c) {
  if (!c.lossy()) return 0;
  // FNV-1a of the canonical spec and the scope: what every rank must agree on. The key
  // and error feedback are per-rank bookkeeping and may differ without harm.
  std::uint32_t h = 2166136261u;
  const std::string text = c.to_string() + (c.scope == Compression::Scope::region ? "@region" : "@all");
  for (unsigned char ch : text) h = (h ^ ch) * 16777619u;
  return h == 0 ? 1 : h;
}

}  // namespace strata::quant
