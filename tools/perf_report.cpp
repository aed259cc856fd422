#include "perf_report.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>

namespace strata::perf {

namespace {

// printf-style into a std::string: the column widths below are nccl-tests' own format
// strings, and keeping them verbatim is the easiest way to stay byte-compatible.
[[gnu::format(printf, 1, 2)]] std::string sformat(const char* fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof small) return std::string(small, static_cast<std::size_t>(n));
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

std::string format_group(const Timing& t) {
  const std::string time = format_time_us(t.time_us);
  if (!t.nwrong) return sformat("  %7s  %6.2f  %6.2f  %5s", time.c_str(), t.alg_bw, t.bus_bw, "N/A");
  return sformat("  %7s  %6.2f  %6.2f  %5g", time.c_str(), t.alg_bw, t.bus_bw,
                 static_cast<double>(*t.nwrong));
}

// Whole bytes: a fraction of a byte per call is noise, and the column stays narrow.
std::string format_wan(const std::optional<WanBytes>& w) {
  if (!w) return sformat("  %10s", "-");
  return sformat("  %10.0f", w->mean);
}

Json json_timing(const Timing& t) {
  Json j;
  j["time"] = json_number(t.time_us);
  j["alg_bw"] = json_number(t.alg_bw);
  j["bus_bw"] = json_number(t.bus_bw);
  j["nwrong"] = t.nwrong ? Json(*t.nwrong) : Json(nullptr);
  return j;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc{} || ptr == begin) return std::nullopt;
  std::string_view rest(ptr, static_cast<std::size_t>(end - ptr));
  std::uint64_t unit = 1;
  if (!rest.empty()) {
    switch (rest.front()) {
      case 'k': case 'K': unit = 1ull << 10; break;
      case 'm': case 'M': unit = 1ull << 20; break;
      case 'g': case 'G': unit = 1ull << 30; break;
      case 't': case 'T': unit = 1ull << 40; break;
      default: break;
    }
    if (unit != 1) rest.remove_prefix(1);
  }
  if (rest == "B" || rest == "b" || (unit != 1 && (rest == "iB" || rest == "ib"))) rest = {};
  if (!rest.empty()) return std::nullopt;
  if (value > std::numeric_limits<std::uint64_t>::max() / unit) return std::nullopt;
  return value * unit;
}

std::optional<double> bus_bw_factor(std::string_view collective, int nranks) {
  const double n = nranks < 1 ? 1.0 : static_cast<double>(nranks);
  if (collective == "all_reduce") return 2.0 * (n - 1.0) / n;
  if (collective == "reduce_scatter" || collective == "all_gather" || collective == "alltoall")
    return (n - 1.0) / n;
  if (collective == "broadcast" || collective == "reduce" || collective == "sendrecv") return 1.0;
  return std::nullopt;
}

std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                       std::uint64_t step_bytes, std::uint64_t step_factor) {
  std::vector<std::uint64_t> sizes;
  const bool by_factor = step_factor > 1;
  if (min_bytes > max_bytes || (by_factor && min_bytes == 0) || (!by_factor && step_bytes == 0))
    return sizes;
  for (std::uint64_t s = min_bytes; s <= max_bytes;) {
    sizes.push_back(s);
    // Stop rather than wrap around when the next size would overflow.
    if (by_factor) {
      if (s > std::numeric_limits<std::uint64_t>::max() / step_factor) break;
      s *= step_factor;
    } else {
      if (s > std::numeric_limits<std::uint64_t>::max() - step_bytes) break;
      s += step_bytes;
    }
  }
  return sizes;
}

Timing make_timing(double time_us, std::uint64_t bytes, double bus_factor,
                   std::optional<std::int64_t> nwrong) {
  Timing t;
  t.time_us = time_us;
  // bytes per microsecond / 1e3 is bytes per second / 1e9.
  t.alg_bw = time_us > 0 ? static_cast<double>(bytes) / time_us / 1.0e3 : 0.0;
  t.bus_bw = t.alg_bw * bus_factor;
  t.nwrong = nwrong;
  return t;
}

std::string format_time_us(double us) {
  if (us >= 10000.0) return sformat("%7.0f", us);
  if (us >= 100.0) return sformat("%7.1f", us);
  return sformat("%7.2f", us);
}

std::string format_config_header(const SweepConfig& c) {
  const bool by_factor = c.step_factor > 1;
  std::string s = sformat(
      "# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      static_cast<unsigned long long>(c.min_bytes), static_cast<unsigned long long>(c.max_bytes),
      static_cast<unsigned long long>(by_factor ? c.step_factor : c.step_bytes),
      by_factor ? "factor" : "bytes", c.warmup_iters, c.iters, c.check);
  if (c.blocking == 1) s += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  if (c.blocking > 1) s += "# Blocking Enabled: wait for completion after each collective (no barrier) \n";
  if (c.median) s += "# Times: the median iteration (each waited for), not the mean \n";
  s += "#\n";
  return s;
}

std::string format_rank_lines(std::string_view library_line, const std::vector<RankLine>& ranks) {
  std::string s = "# " + std::string(library_line) + "\n";
  for (const auto& r : ranks) {
    s += sformat("#  Rank %2d Group %2d Pid %6ld on %10s", r.rank, 0, r.pid, r.host.c_str());
    if (!r.note.empty()) s += " " + r.note;
    s += "\n";
  }
  return s;
}

std::string format_table_header() {
  std::string s = "#\n";
  s += sformat("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
               "", "", "", "", "");
  s += sformat("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %10s\n", "size", "count",
               "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong", "wanB/rank");
  s += sformat("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s  %10s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
               "(B)");
  return s;
}

std::string format_row(const ResultRow& row) {
  return sformat("%12llu  %12llu  %8s  %6s  %6i", static_cast<unsigned long long>(row.size),
                 static_cast<unsigned long long>(row.count), row.type.c_str(), row.redop.c_str(),
                 row.root) +
         format_group(row.out_of_place) + format_group(row.in_place) + format_wan(row.wan) +
         (row.rel_error ? sformat("  relErr %.3e", *row.rel_error) : std::string()) + "\n";
}

std::string format_footer(std::int64_t wrong, double avg_bus_bw) {
  return sformat("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
                 wrong != 0 ? "FAILED" : "OK") +
         sformat("# Avg bus bandwidth    : %g \n", avg_bus_bw) + "#\n";
}

std::string format_wan_summary(const std::vector<ResultRow>& rows) {
  const ResultRow* pick = nullptr;
  for (const auto& r : rows)
    if (r.wan && (pick == nullptr || r.size >= pick->size)) pick = &r;
  if (pick == nullptr) return {};
  const WanBytes& w = *pick->wan;
  const double overhead = w.mean > 0 ? (w.wire_mean / w.mean - 1.0) * 100.0 : 0.0;
  return sformat("# WAN bytes sent per rank per call: max %.0f, mean %.0f (payload), wire overhead %.2f%% "
                 "(size %llu)\n",
                 w.max, w.mean, overhead, static_cast<unsigned long long>(pick->size));
}

std::string format_wan_path(double rtt_s, double srtt_s, double rate_bytes_per_s, int streams, double loss) {
  if (rtt_s <= 0) return {};
  return sformat("# WAN path (rank 0's link, from its streams' TCP state): round trip %.2f ms (smoothed %.2f ms), "
                 "delivery rate %.1f Mbit/s over %d stream(s), %.3f%% of segments retransmitted\n",
                 rtt_s * 1e3, srtt_s * 1e3, rate_bytes_per_s * 8 / 1e6, streams, loss * 100);
}

double average_bus_bw(const std::vector<ResultRow>& rows) {
  if (rows.empty()) return 0.0;
  double sum = 0;
  for (const auto& r : rows) sum += r.out_of_place.bus_bw + r.in_place.bus_bw;
  return sum / (2.0 * static_cast<double>(rows.size()));
}

std::int64_t total_wrong(const std::vector<ResultRow>& rows) {
  std::int64_t n = 0;
  for (const auto& r : rows) n += r.out_of_place.nwrong.value_or(0) + r.in_place.nwrong.value_or(0);
  return n;
}

Json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;  // JSON has neither NaN nor infinity
  if (v == std::trunc(v) && std::fabs(v) < 0x1p53) return static_cast<std::int64_t>(v);
  return v;
}

Json json_document(const RunInfo& info, const std::vector<ResultRow>& rows) {
  Json doc;
  doc["tool"] = info.tool;
  doc["collective"] = info.collective;
  doc["ranks"] = info.ranks;
  doc["transport"] = info.transport;
  doc["dtype"] = info.dtype;
  doc["op"] = info.op;
  Json results = Json::array();
  for (const auto& r : rows) {
    Json j;
    j["size"] = r.size;
    j["count"] = r.count;
    j["type"] = r.type;
    j["redop"] = r.redop;
    j["root"] = r.root;
    if (!r.algorithm.empty()) j["algorithm"] = r.algorithm;
    j["wan_bytes_per_rank"] = r.wan ? json_number(r.wan->mean) : Json(nullptr);
    if (r.rel_error) j["rel_error"] = json_number(*r.rel_error);
    j["out_of_place"] = json_timing(r.out_of_place);
    j["in_place"] = json_timing(r.in_place);
    results.push_back(std::move(j));
  }
  doc["results"] = std::move(results);
  doc["average_bus_bandwidth"] = json_number(average_bus_bw(rows));
  return doc;
}

std::string dump_document(const Json& doc) {
  std::string s = "{";
  bool after_results = false;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it != doc.begin()) s += after_results ? ",\n" : ",";
    s += dump(Json(it.key())) + ":";
    after_results = it.key() == "results" && it->is_array();
    if (!after_results) {
      s += dump(*it);
      continue;
    }
    s += "[";
    for (std::size_t i = 0; i < it->size(); ++i) s += (i ? ",\n" : "\n") + dump((*it)[i]);
    s += "]";
  }
  return s + "}\n";
}

std::string format_json(const RunInfo& info, const std::vector<ResultRow>& rows) {
  return dump_document(json_document(info, rows));
}

bool write_json_file(const std::string& path, const RunInfo& info,
                     const std::vector<ResultRow>& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const std::string doc = format_json(info, rows);
  const bool wrote = std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
  const int saved = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote) errno = saved;
  return wrote && closed;
}

}  // namespace strata::perf
