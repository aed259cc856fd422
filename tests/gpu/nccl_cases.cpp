#include "nccl_cases.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata::gpu_check {

namespace {

constexpr Coll kAll[] = {Coll::all_reduce, Coll::all_gather, Coll::reduce_scatter, Coll::broadcast, Coll::sendrecv};

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::optional<Coll> parse_coll(std::string_view name) {
  for (const Coll c : kAll)
    if (coll_name(c) == name) return c;
  return std::nullopt;
}

std::string coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::all_gather: return "all_gather";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::broadcast: return "broadcast";
    case Coll::sendrecv: return "sendrecv";
  }
  return "?";
}

std::vector<Coll> parse_coll_list(std::string_view list) {
  if (list == "all") return {std::begin(kAll), std::end(kAll)};
  std::vector<Coll> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view word = list.substr(0, comma);
    const auto c = parse_coll(word);
    if (!c)
      throw std::invalid_argument("-t: unknown collective '" + std::string(word) +
                                  "' (all_reduce, all_gather, reduce_scatter, broadcast, sendrecv or all)");
    out.push_back(*c);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

bool reduces(Coll c) { return c == Coll::all_reduce || c == Coll::reduce_scatter; }
bool has_in_place(Coll c) { return c != Coll::sendrecv; }

Shape shape(Coll c, std::uint64_t size_bytes, int nranks) {
  const std::size_t n = static_cast<std::size_t>(nranks < 1 ? 1 : nranks);
  const std::size_t elems = static_cast<std::size_t>(size_bytes / sizeof(float));
  Shape s;
  switch (c) {
    case Coll::all_gather:
      s.count = elems / n;
      s.send = s.count;
      s.recv = s.count * n;
      break;
    case Coll::reduce_scatter:
      s.count = elems / n;
      s.send = s.count * n;
      s.recv = s.count;
      break;
    default:
      s.count = s.send = s.recv = elems;
  }
  s.bytes = static_cast<std::uint64_t>(std::max(s.send, s.recv)) * sizeof(float);
  return s;
}

std::size_t in_place_offset(Coll c, const Shape& s, int rank) {
  if (c == Coll::all_gather || c == Coll::reduce_scatter) return s.count * static_cast<std::size_t>(rank);
  return 0;
}

std::uint64_t row_seed(Coll c, std::uint64_t size_bytes) {
  return mix(static_cast<std::uint64_t>(c) * 0x100000001b3ULL ^ mix(size_bytes));
}

float input_value(std::uint64_t seed, int rank, std::size_t i) {
  const std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(rank) << 40 ^ i));
  return static_cast<float>(static_cast<int>(h % 9) - 4);
}

float expected_value(Coll c, const Shape& s, std::uint64_t seed, int rank, int nranks, std::size_t i) {
  switch (c) {
    case Coll::all_reduce:
    case Coll::reduce_scatter: {
      const std::size_t at = c == Coll::all_reduce ? i : s.count * static_cast<std::size_t>(rank) + i;
      float sum = 0;
      for (int r = 0; r < nranks; ++r) sum += input_value(seed, r, at);
      return sum;
    }
    case Coll::all_gather:
      return input_value(seed, static_cast<int>(i / s.count), i % s.count);
    case Coll::broadcast:
      return input_value(seed, 0, i);
    case Coll::sendrecv:
      return input_value(seed, (rank + nranks - 1) % nranks, i);
  }
  return 0;
}

}  // namespace strata::gpu_check
