// parse_codec and the spec's canonical spelling (grammar in codec.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "quant/codec.hpp"
#include "quant/wire.hpp"
#include "strata/errors.hpp"

namespace strata::quant {
namespace {

[[noreturn]] void bad(std::string_view text, const std::string& what) {
  throw InvalidArgument("parse_codec: " + what + " in '" + std::string(text) + "'");
}

bool value_from_name(std::string_view name, ValueCoding& v) {
  if (name == "fp16") v = ValueCoding::fp16;
  else if (name == "bf16") v = ValueCoding::bf16;
  else if (name == "int8") v = ValueCoding::int8;
  else if (name == "int4") v = ValueCoding::int4;
  else return false;
  return true;
}

double parse_density(std::string_view text, std::string_view tok) {
  double d = 0;
  const char* end = tok.data() + tok.size();
  const auto [ptr, ec] = std::from_chars(tok.data(), end, d);
  if (tok.empty() || ec != std::errc{} || ptr != end || !(d > 0 && d <= 1)) {
    bad(text, "bad density '" + std::string(tok) + "' (expected a number in (0, 1])");
  }
  return d;
}

}  // namespace

const char* to_string(ValueCoding v) {
  switch (v) {
    case ValueCoding::f32: return "f32";
    case ValueCoding::fp16: return "fp16";
    case ValueCoding::bf16: return "bf16";
    case ValueCoding::int8: return "int8";
    case ValueCoding::int4: return "int4";
  }
  return "unknown";
}

const char* to_string(IndexCoding c) {
  switch (c) {
    case IndexCoding::delta_varint: return "delta_varint";
    case IndexCoding::bitmap: return "bitmap";
  }
  return "unknown";
}

CodecSpec parse_codec(std::string_view text) {
  if (text.empty()) bad(text, "empty codec spec");
  const std::size_t comma = text.find(',');
  const std::string_view base = text.substr(0, comma);
  CodecSpec s;
  if (base.starts_with("topk:")) {
    s.sparsity = Sparsity::topk;
    const std::string_view rest = base.substr(5);
    const std::size_t plus = rest.find('+');
    s.density = parse_density(text, rest.substr(0, plus));
    if (plus != std::string_view::npos) {
      const std::string_view v = rest.substr(plus + 1);
      if (!value_from_name(v, s.values)) {
        bad(text, "unknown top-k value type '" + std::string(v) +
                      "' (expected fp16, bf16, int8 or int4)");
      }
    }
  } else if (base == "none") {
    s.values = ValueCoding::f32;
  } else if (!value_from_name(base, s.values)) {
    bad(text, "unknown codec '" + std::string(base) +
                  "' (expected none, fp16, bf16, int8, int4 or topk:<density>)");
  }

  bool have_select = false;
  std::size_t pos = comma;
  while (pos != std::string_view::npos) {
    const std::size_t next = text.find(',', pos + 1);
    const std::string_view opt = text.substr(pos + 1, next == std::string_view::npos ? next : next - pos - 1);
    pos = next;
    if (opt == "sampled" || opt == "exact") {
      if (s.sparsity != Sparsity::topk) bad(text, "option '" + std::string(opt) + "' needs a topk codec");
      if (have_select) bad(text, "option '" + std::string(opt) + "' repeats the selection method");
      have_select = true;
      s.select = opt == "exact" ? TopkSelect::exact : TopkSelect::sampled;
    } else if (opt == "stochastic") {
      if (!wire::is_block_coding(s.values)) bad(text, "option 'stochastic' needs int8 or int4 values");
      if (s.stochastic) bad(text, "option 'stochastic' is repeated");
      s.stochastic = true;
    } else {
      bad(text, (opt.empty() ? std::string("empty option") : "unknown option '" + std::string(opt) + "'") +
                    " (expected sampled, exact or stochastic)");
    }
  }
  return s;
}

std::string to_string(const CodecSpec& s) {
  std::string out;
  if (s.sparsity == Sparsity::topk) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, s.density);
    out = "topk:" + std::string(buf, r.ptr);
    if (s.values != ValueCoding::f32) out += std::string("+") + to_string(s.values);
    if (s.select == TopkSelect::exact) out += ",exact";
  } else {
    out = s.values == ValueCoding::f32 ? "none" : to_string(s.values);
  }
  if (s.stochastic) out += ",stochastic";
  return out;
}

void validate(const CodecSpec& s) {
  const auto fail = [&](const std::string& what) {
    throw InvalidArgument("quant: invalid codec spec: " + what);
  };
  if (s.sparsity != Sparsity::dense && s.sparsity != Sparsity::topk) fail("unknown sparsity");
  if (static_cast<unsigned>(s.values) > static_cast<unsigned>(ValueCoding::int4)) {
    fail("unknown value coding");
  }
  if (s.sparsity == Sparsity::topk) {
    if (!(s.density > 0 && s.density <= 1)) fail("density must be in (0, 1], got " + std::to_string(s.density));
    if (s.select != TopkSelect::sampled && s.select != TopkSelect::exact) fail("unknown selection");
  } else if (s.density != 1.0 || s.select != TopkSelect::sampled) {
    fail("density and selection apply to topk codecs only");
  }
  if (s.stochastic && !wire::is_block_coding(s.values)) fail("stochastic rounding needs int8 or int4");
  if (wire::is_block_coding(s.values)) {
    if (s.block < 1 || s.block > kMaxBlock) fail("block size must be in [1, 2^24], got " + std::to_string(s.block));
    if (s.values == ValueCoding::int4 && s.block % 2 != 0) fail("int4 needs an even block size");
  }
}

std::size_t topk_count(double density, std::size_t n) {
  if (n == 0) return 0;
  const double k = std::round(density * static_cast<double>(n));
  if (!(k >= 1)) return 1;
  return k >= static_cast<double>(n) ? n : static_cast<std::size_t>(k);
}

}  // namespace strata::quant
