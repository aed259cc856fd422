#include "bootstrap/job_secret.hpp"

#include <fstream>
#include <iterator>

#include "bootstrap/crypto.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

JobSecret JobSecret::random() {
  JobSecret s;
  crypto::random_bytes(s.key);
  s.open = false;
  return s;
}

JobSecret JobSecret::from_text(const std::string& text) {
  JobSecret s;
  s.key = crypto::sha256({std::span(reinterpret_cast<const unsigned char*>(text.data()), text.size())});
  s.open = false;
  return s;
}

JobSecret JobSecret::from_file(const std::string& path, const std::string& variable) {
  std::ifstream in(path, std::ios::binary);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) contents.clear();
  while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r')) contents.pop_back();
  if (contents.empty())
    throw InvalidArgument(variable + ": cannot read a secret from '" + path + "' (missing or empty)");
  return from_text(contents);
}

std::string JobSecret::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : key) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::optional<JobSecret> JobSecret::from_hex(const std::string& hex) {
  if (hex.size() != 64) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  JobSecret s;
  for (std::size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    s.key[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  s.open = false;
  return s;
}

}  // namespace strata::bootstrap
