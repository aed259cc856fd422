#include "topology/algorithm_rules.hpp"

#include <cctype>

#include "strata/errors.hpp"

namespace strata::topology {

namespace {

struct KindName {
  const char* name;
  std::optional<CollectiveKind> kind;  // none: "all"
};

constexpr KindName kKinds[] = {
    {"allreduce", CollectiveKind::allreduce},   {"all_reduce", CollectiveKind::allreduce},
    {"reduce_scatter", CollectiveKind::reduce_scatter}, {"reducescatter", CollectiveKind::reduce_scatter},
    {"allgather", CollectiveKind::allgather},   {"all_gather", CollectiveKind::allgather},
    {"broadcast", CollectiveKind::broadcast},   {"bcast", CollectiveKind::broadcast},
    {"reduce", CollectiveKind::reduce},         {"barrier", CollectiveKind::barrier},
    {"all", std::nullopt},
};

// 'token', built by appending: GCC 12 misreads "'" + std::string(...) as an overlapping
// copy (-Wrestrict) at -O3.
std::string quote(std::string_view s) {
  std::string q(1, '\'');
  q.append(s);
  q += '\'';
  return q;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool looks_like_range(std::string_view s) {
  return !s.empty() && std::isdigit(static_cast<unsigned char>(s.front()));
}

std::optional<std::uint64_t> parse_size_token(std::string_view s) {
  if (lower(s) == "inf") return UINT64_MAX;
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  if (i == s.size()) return v;
  if (i + 1 != s.size()) return std::nullopt;
  int shift = 0;
  switch (std::tolower(static_cast<unsigned char>(s[i]))) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    default: return std::nullopt;
  }
  if (v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::string valid_algorithms() { return collectives::algorithm_names() + "; tree = double_tree; auto"; }

class RuleParser {
 public:
  RuleParser(std::string_view spec, const char* what) : spec_(spec), what_(what) {}

  [[noreturn]] void fail(std::string_view rule, const std::string& msg) const {
    std::string where = std::string(what_) + "='" + std::string(spec_) + "'";
    if (rule != spec_) where += ", rule '" + std::string(rule) + "'";
    throw InvalidArgument(where + ": " + msg);
  }

  std::optional<CollectiveKind> kind(std::string_view rule, std::string_view tok) const {
    const std::string t = lower(tok);
    for (const auto& k : kKinds)
      if (t == k.name) return k.kind;
    fail(rule, quote(tok) + " is not a collective (allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, all)");
  }

  void range(std::string_view rule, std::string_view tok, AlgorithmRule& r) const {
    const auto dash = tok.find('-');
    if (dash == std::string_view::npos)
      fail(rule, quote(tok) + " is not a size range (LO-HI, e.g. 0-64k or 1m-inf)");
    const auto lo_tok = tok.substr(0, dash), hi_tok = tok.substr(dash + 1);
    const auto lo = parse_size_token(lo_tok), hi = parse_size_token(hi_tok);
    if (!lo || lower(lo_tok) == "inf")
      fail(rule, quote(lo_tok) + " is not a size (digits with an optional k, m or g)");
    if (!hi) fail(rule, quote(hi_tok) + " is not a size (digits with an optional k, m or g, or inf)");
    if (*lo > *hi) fail(rule, "range '" + std::string(tok) + "' ends before it starts");
    r.lo = *lo;
    r.hi = *hi;
  }

  const collectives::Algorithm* algorithm(std::string_view rule, std::string_view tok) const {
    if (lower(tok) == "auto") return nullptr;
    if (const auto* a = find_algorithm_alias(tok)) return a;
    fail(rule, "unknown algorithm '" + std::string(tok) + "' (valid: " + valid_algorithms() + ")");
  }

 private:
  std::string_view spec_;
  const char* what_;
};

}  // namespace

std::optional<CollectiveKind> parse_collective_name(std::string_view name) {
  const std::string t = lower(name);
  for (const auto& k : kKinds)
    if (t == k.name) return k.kind;
  return std::nullopt;
}

const collectives::Algorithm* find_algorithm_alias(std::string_view name) {
  if (name == "tree") return &collectives::algorithm(collectives::AlgorithmId::double_tree);
  return collectives::find_algorithm(name);
}

const AlgorithmRule* AlgorithmRules::match(CollectiveKind k, std::uint64_t bytes) const {
  for (const auto& r : rules)
    if (r.matches(k, bytes)) return &r;
  return nullptr;
}

AlgorithmRules parse_algorithm_rules(std::string_view spec, const char* what, bool allow_plan) {
  AlgorithmRules out;
  const RuleParser p(spec, what);
  if (trim(spec).empty()) return out;
  std::optional<CollectiveKind> sticky;  // the collective of the previous rule
  for (const std::string_view raw : split(spec, '#')) {
    const std::string_view rule = trim(raw);
    if (rule.empty()) p.fail(rule, "empty rule (two '#' in a row, or one at an end)");
    const std::string word = lower(rule);
    if (word == "hier" || word == "flat" || (word == "auto" && allow_plan)) {
      if (!allow_plan) p.fail(rule, quote(rule) + " chooses a plan, which only STRATA_ALGO can do");
      if (out.plan) p.fail(rule, quote(rule) + " is a second plan word");
      out.plan = word == "hier" ? PlanChoice::hierarchical : word == "flat" ? PlanChoice::flat : PlanChoice::automatic;
      continue;
    }
    const auto parts = split(rule, ':');
    if (parts.size() > 3)
      p.fail(rule, "too many ':' (a rule is [collective:][range:]algorithm)");
    AlgorithmRule r;
    r.text = std::string(rule);
    r.kind = sticky;
    std::size_t i = 0;
    if (parts.size() == 3 || (parts.size() == 2 && !looks_like_range(trim(parts[0]))))
      r.kind = sticky = p.kind(rule, trim(parts[i++]));
    if (parts.size() - i == 2) p.range(rule, trim(parts[i++]), r);
    const std::string_view name = trim(parts[i]);
    if (name.empty()) p.fail(rule, "no algorithm named (a rule is [collective:][range:]algorithm)");
    r.algorithm = p.algorithm(rule, name);
    out.rules.push_back(std::move(r));
  }
  return out;
}

std::uint64_t message_bytes(CollectiveKind kind, std::size_t count, DataType dt, int group_size) {
  std::uint64_t b = static_cast<std::uint64_t>(count) * dtype_size(dt);
  if (kind == CollectiveKind::reduce_scatter || kind == CollectiveKind::allgather)
    b *= static_cast<std::uint64_t>(std::max(group_size, 1));
  return b;
}

std::string format_size(std::uint64_t bytes) {
  if (bytes == UINT64_MAX) return "inf";
  const char* suffix[] = {"", "k", "m", "g"};
  int i = 0;
  while (i < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + suffix[i];
}

const collectives::Algorithm* resolve_call_algorithm(const std::string& spec, CollectiveKind kind, DataType dt,
                                                     std::size_t count, collectives::GroupShape group) {
  if (spec.empty()) return nullptr;
  const int group_size = group.size;
  // Callers repeat one spec call after call (a benchmark loop, a training step), so the
  // last parse is kept per thread.
  thread_local std::string last_spec;
  thread_local AlgorithmRules last_rules;
  if (spec != last_spec) {
    last_rules = parse_algorithm_rules(spec, "algorithm", false);
    last_spec = spec;
  }
  const AlgorithmRule* r = last_rules.match(kind, message_bytes(kind, count, dt, group_size));
  if (!r || !r->algorithm) return nullptr;
  if (!r->algorithm->supports(kind, dt, count, group))
    throw InvalidArgument("algorithm '" + r->text + "' does not support " + to_string(kind) + " of " +
                          to_string(dt) + " over " + std::to_string(group_size) + " ranks" +
                          (group.servers ? "" : " without dedicated servers") +
                          (group.shared_memory ? "" : ", which do not share memory") + " (valid: " +
                          collectives::algorithm_names(kind, dt, count, group) + ")");
  return r->algorithm;
}

}  // namespace strata::topology
