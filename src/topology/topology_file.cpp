#include "topology/topology_file.hpp"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "strata/errors.hpp"
#include "topology.pb.h"

namespace strata::topology {
namespace {

namespace pb = google::protobuf;
using Tree = pb::TextFormat::ParseInfoTree;

// Protobuf reports an unknown field after its name and a bad value without its field, in
// its own wording; operators need the place to edit and the field's name.
class Collector : public pb::io::ErrorCollector {
 public:
  Collector(std::string source, const std::string& text) : source_(std::move(source)) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines_.push_back(line);
  }

  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    const std::string text =
        line >= 0 && line < static_cast<int>(lines_.size()) ? lines_[static_cast<std::size_t>(line)] : "";
    const std::string before =
        text.substr(0, std::min<std::size_t>(static_cast<std::size_t>(std::max(column, 0)), text.size()));
    std::string what = message;
    static const std::regex no_field(R"re(Message type "(?:\w+\.)*(\w+)" has no field named "(\w+)"\.?)re");
    static const std::regex value_of(R"re((\w+)\s*:\s*$)re");
    std::smatch m;
    if (std::regex_match(message, m, no_field)) {
      what = "no field named '" + m[2].str() + "' in " + m[1].str();
      if (const auto at = before.rfind(m[2].str()); at != std::string::npos) column = static_cast<int>(at);
    } else if (std::regex_search(before, m, value_of)) {
      what = m[1].str() + ": " + message;
    }
    errors_.push_back(source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
                      what);
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string source_;
  std::vector<std::string> lines_;
  std::vector<std::string> errors_;
};

// Raises semantic errors at the place in the file they are about.
class Checker {
 public:
  Checker(const std::string& source, const Tree& root) : source_(source), root_(root) {}

  // Position of `field` inside the `index`-th entry of repeated message field `outer` (or of
  // the entry itself when `field` was not written, e.g. left at its default).
  SourcePos pos(const char* outer, int index, const char* field = nullptr) const {
    const auto* top = wire::Topology::descriptor();
    const auto* of = top->FindFieldByName(outer);
    const int at = of->is_repeated() ? index : -1;
    SourcePos p = convert(root_.GetLocation(of, at));
    if (field == nullptr) return p;
    const Tree* nested = root_.GetTreeForNested(of, at);
    if (nested == nullptr) return p;
    const auto* f = of->message_type()->FindFieldByName(field);
    const SourcePos inner = convert(nested->GetLocation(f, -1));
    return inner.line > 0 ? inner : p;
  }

  [[noreturn]] void fail(SourcePos p, const std::string& field, const std::string& what) const {
    std::string where = source_;
    if (p.line > 0) where += ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
    throw InvalidArgument(where + ": " + field + ": " + what);
  }

 private:
  static SourcePos convert(pb::TextFormat::ParseLocation l) {
    if (l.line < 0) return {};
    return {l.line + 1, l.column + 1};
  }
  const std::string& source_;
  const Tree& root_;
};

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void read_placements(const wire::Topology& t, const Checker& c, int world_size, TopologyFile& out) {
  const int n = t.placement_size();
  if (n == 0) return;
  const int limit = world_size >= 0 ? world_size : n;
  const std::string limit_what =
      world_size >= 0 ? "world size " + std::to_string(world_size) : std::to_string(n) + " placements";
  std::map<int, int> seen;  // rank -> index of its placement
  for (int i = 0; i < n; ++i) {
    const auto& p = t.placement(i);
    if (p.rank() < 0 || p.rank() >= limit)
      c.fail(c.pos("placement", i, "rank"), "placement.rank",
             "rank " + std::to_string(p.rank()) + " is out of range for " + limit_what);
    if (auto [it, fresh] = seen.emplace(p.rank(), i); !fresh)
      c.fail(c.pos("placement", i, "rank"), "placement.rank",
             "rank " + std::to_string(p.rank()) + " is placed twice (first at line " +
                 std::to_string(c.pos("placement", it->second, "rank").line) + ")");
    if (p.host().empty())
      c.fail(c.pos("placement", i), "placement.host", "rank " + std::to_string(p.rank()) + " has no host");
    Placement out_p;
    out_p.rank = p.rank();
    out_p.where = Locality{p.region(), p.cluster(), p.rack(), p.host(), 0};
    out_p.pos = c.pos("placement", i);
    out.placements.push_back(std::move(out_p));
  }
  if (static_cast<int>(seen.size()) < limit) {
    std::string missing;
    int shown = 0;
    for (int r = 0; r < limit && shown < 8; ++r)
      if (!seen.count(r)) missing += (shown++ ? ", " : "") + std::to_string(r);
    c.fail(c.pos("placement", 0), "placement",
           std::to_string(limit - static_cast<int>(seen.size())) + " rank(s) of " + limit_what +
               " are not placed (" + missing +
               (limit - static_cast<int>(seen.size()) > shown ? ", ..." : "") +
               "); place every rank or none");
  }
  std::sort(out.placements.begin(), out.placements.end(),
            [](const Placement& a, const Placement& b) { return a.rank < b.rank; });
}

std::optional<LinkFigures> read_figures(const wire::Topology& t, const Checker& c, const char* level) {
  const auto* f = wire::Topology::descriptor()->FindFieldByName(level);
  const auto& refl = *t.GetReflection();
  if (!refl.HasField(t, f)) return std::nullopt;
  const auto& m = static_cast<const wire::LinkFigures&>(refl.GetMessage(t, f));
  const std::string name = level;
  if (m.latency_us() < 0)
    c.fail(c.pos(level, 0, "latency_us"), name + ".latency_us",
           "latency " + fmt(m.latency_us()) + " is negative");
  if (m.bandwidth_gbps() <= 0)
    c.fail(c.pos(level, 0, "bandwidth_gbps"), name + ".bandwidth_gbps",
           "bandwidth " + fmt(m.bandwidth_gbps()) + " must be positive");
  return LinkFigures{m.latency_us(), m.bandwidth_gbps()};
}

void read_wan(const wire::Topology& t, const Checker& c, TopologyFile& out) {
  std::map<std::pair<std::string, std::string>, WanLink> given;
  for (int i = 0; i < t.wan_size(); ++i) {
    const auto& w = t.wan(i);
    if (w.from_region().empty() || w.to_region().empty())
      c.fail(c.pos("wan", i), w.from_region().empty() ? "wan.from_region" : "wan.to_region",
             "region is missing");
    if (w.from_region() == w.to_region())
      c.fail(c.pos("wan", i, "to_region"), "wan.to_region",
             "link from region '" + w.from_region() + "' to itself");
    if (w.latency_ms() < 0)
      c.fail(c.pos("wan", i, "latency_ms"), "wan.latency_ms",
             "latency " + fmt(w.latency_ms()) + " is negative");
    if (w.bandwidth_mbps() <= 0)
      c.fail(c.pos("wan", i, "bandwidth_mbps"), "wan.bandwidth_mbps",
             "bandwidth " + fmt(w.bandwidth_mbps()) + " must be positive");
    if (!(w.loss_percent() >= 0 && w.loss_percent() < 100))
      c.fail(c.pos("wan", i, "loss_percent"), "wan.loss_percent",
             "loss " + fmt(w.loss_percent()) + " must be at least 0 and below 100 (percent of packets)");
    WanLink l{w.from_region(), w.to_region(), w.latency_ms(), w.bandwidth_mbps(), w.loss_percent(), c.pos("wan", i),
              false};
    auto [it, fresh] = given.emplace(std::pair{l.from_region, l.to_region}, l);
    if (!fresh)
      c.fail(l.pos, "wan",
             "link " + l.from_region + " -> " + l.to_region + " is given twice (first at line " +
                 std::to_string(it->second.pos.line) + ")");
  }
  auto all = given;
  for (const auto& [key, l] : given) {
    if (given.count({key.second, key.first})) continue;
    WanLink back = l;
    std::swap(back.from_region, back.to_region);
    back.mirrored = true;
    all.emplace(std::pair{back.from_region, back.to_region}, back);
  }
  for (auto& [key, l] : all) out.wan.push_back(l);
}

// The matrix must name only the given regions and cover every pair of them.
void check_matrix(const TopologyFile& f, const std::vector<std::string>& regions, const std::string& origin) {
  const std::set<std::string> known(regions.begin(), regions.end());
  for (const auto& l : f.wan) {
    if (l.mirrored) continue;
    for (const auto* r : {&l.from_region, &l.to_region})
      if (!known.count(*r)) {
        auto where = f.source + ":" + std::to_string(l.pos.line) + ":" + std::to_string(l.pos.column);
        throw InvalidArgument(where + ": wan." + (r == &l.from_region ? "from_region" : "to_region") +
                              ": no rank is in region '" + *r + "' (" + origin + ")");
      }
  }
  // No matrix at all is fine (the figures will be probed); a partial one is a mistake.
  if (regions.size() < 2 || f.wan.empty()) return;
  for (std::size_t a = 0; a < regions.size(); ++a)
    for (std::size_t b = a + 1; b < regions.size(); ++b)
      if (!f.wan_link(regions[a], regions[b]))
        throw InvalidArgument(f.source + ": wan: no link between regions '" + regions[a] + "' and '" +
                              regions[b] + "' (" + std::to_string(regions.size()) + " regions need all " +
                              std::to_string(regions.size() * (regions.size() - 1) / 2) + " pairs)");
}

std::vector<std::string> regions_in_order(const std::vector<Locality>& ls) {
  std::vector<std::string> out;
  for (const auto& l : ls)
    if (std::find(out.begin(), out.end(), l.region) == out.end()) out.push_back(l.region);
  return out;
}

}  // namespace

const WanLink* TopologyFile::wan_link(const std::string& from, const std::string& to) const {
  for (const auto& l : wan)
    if (l.from_region == from && l.to_region == to) return &l;
  return nullptr;
}

std::vector<std::string> TopologyFile::placement_regions() const {
  std::vector<Locality> ls;
  for (const auto& p : placements) ls.push_back(p.where);
  return regions_in_order(ls);
}

TopologyFile parse_topology(const std::string& text, const std::string& source, int world_size) {
  wire::Topology t;
  Tree tree;
  Collector errors(source, text);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, &t)) {
    std::string all;
    for (const auto& e : errors.errors()) all += (all.empty() ? "" : "\n") + e;
    throw InvalidArgument(all.empty() ? source + ": not a valid topology file" : all);
  }
  const Checker c(source, tree);
  TopologyFile out;
  out.source = source;
  read_placements(t, c, world_size, out);
  out.host = read_figures(t, c, "host");
  out.rack = read_figures(t, c, "rack");
  out.cluster = read_figures(t, c, "cluster");
  read_wan(t, c, out);
  if (!out.placements.empty()) {
    check_matrix(out, out.placement_regions(), "placements");
  } else {
    // Without placements the ranks' regions are unknown until bootstrap; the pairs the
    // matrix itself names must still be complete.
    std::vector<std::string> named;
    for (const auto& l : out.wan)
      if (std::find(named.begin(), named.end(), l.from_region) == named.end()) named.push_back(l.from_region);
    check_matrix(out, named, "wan");
  }
  return out;
}

TopologyFile load_topology_file(const std::string& path, int world_size) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("topology file " + path + " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_topology(text.str(), path, world_size);
}

void check_wan_regions(const TopologyFile& file, const std::vector<Locality>& localities) {
  check_matrix(file, regions_in_order(localities), "the ranks' localities");
}

std::vector<Locality> apply_placements(const TopologyFile& file, std::vector<Locality> from_env) {
  if (!file.placements.empty()) {
    if (file.placements.size() != from_env.size())
      throw InvalidArgument(file.source + ": placement: the file places " +
                            std::to_string(file.placements.size()) + " ranks but the job has " +
                            std::to_string(from_env.size()));
    for (const auto& p : file.placements) from_env[static_cast<std::size_t>(p.rank)] = p.where;
    // A host is identified by its whole path: two regions may both have a "node0".
    for (std::size_t r = 0; r < from_env.size(); ++r) {
      auto& l = from_env[r];
      l.local_rank = 0;
      for (std::size_t q = 0; q < r; ++q) {
        const auto& o = from_env[q];
        if (o.host == l.host && o.rack == l.rack && o.cluster == l.cluster && o.region == l.region)
          ++l.local_rank;
      }
    }
  }
  check_wan_regions(file, from_env);
  return from_env;
}

}  // namespace strata::topology
