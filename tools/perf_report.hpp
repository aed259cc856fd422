// nccl-tests-compatible result tables and JSON, shared by strata-perf and the peer
// benchmarks (Gloo, MPI) in bench/peers. It knows nothing about strata itself, so
// that every tool prints byte-identical layouts and scripts can parse them all alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::perf {

// nccl-tests' size syntax: decimal digits with an optional K, M, G or T suffix (powers
// of 1024, either case), optionally followed by "B". nullopt on anything else or overflow.
std::optional<std::uint64_t> parse_size(std::string_view text);

// busbw = algbw * factor, from nccl-tests' *GetBw functions. Accepts the nccl-tests
// names (all_reduce, reduce_scatter, all_gather, broadcast, reduce, sendrecv, alltoall)
// and nullopt for anything else. nranks < 1 is treated as 1.
std::optional<double> bus_bw_factor(std::string_view collective, int nranks);

// The sizes a sweep visits, as nccl-tests' loop does: from min while <= max, times
// step_factor when it is above 1, else plus step_bytes. Empty when the loop would not
// advance (step_factor <= 1 with step_bytes 0, or min 0 with a factor) or min > max.
std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                       std::uint64_t step_bytes, std::uint64_t step_factor);

// One timed group (out-of-place or in-place) of a row.
struct Timing {
  double time_us = 0;
  double alg_bw = 0;  // GB/s, 1 GB = 1e9 B
  double bus_bw = 0;
  std::optional<std::int64_t> nwrong;  // nullopt when not checked (printed as N/A)
};

// algbw = bytes / time; busbw = algbw * factor. A non-positive time yields zero bandwidth.
Timing make_timing(double time_us, std::uint64_t bytes, double bus_factor,
                   std::optional<std::int64_t> nwrong);

// Bytes each rank sent over the inter-region (WAN) link per collective call, over both
// timed groups. Measured by strata-perf on communicators that span regions; the peers
// (and strata-perf within one region) leave it unset.
struct WanBytes {
  double mean = 0;       // payload, mean over ranks
  double max = 0;        // payload, the busiest rank
  double wire_mean = 0;  // payload plus the link's framing, acks and resends, mean over ranks
};

struct ResultRow {
  std::uint64_t size = 0;   // bytes: max(send, recv) buffer, the full buffer for AG/RS
  std::uint64_t count = 0;  // elements passed to the call (per rank for AG/RS)
  std::string type;         // nccl-tests spelling: float, half, bfloat16, int8, ...
  std::string redop;        // sum, prod, min, max, avg, or none
  int root = -1;
  Timing out_of_place;
  Timing in_place;
  std::optional<WanBytes> wan;  // the wanB/rank column (mean); "-" when unset
  // With --compress: ||result - exact|| / ||exact|| of one checked call, the worse of the
  // two groups; printed after the columns as "relErr X".
  std::optional<double> rel_error;
  // strata-perf --algo: the algorithm the row forced; "" (no JSON key) when automatic.
  std::string algorithm;
};

// The parameters line of the header block.
struct SweepConfig {
  std::uint64_t min_bytes = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t step_bytes = 0;
  std::uint64_t step_factor = 1;
  int warmup_iters = 0;
  int iters = 0;
  int check = 0;
  int blocking = 0;  // nccl-tests -z
  bool median = false;  // strata-perf --median
};

// One participant, printed where nccl-tests lists its devices.
struct RankLine {
  int rank = 0;
  long pid = 0;
  std::string host;
  std::string note;  // appended verbatim when not empty (e.g. "region eu-west")
};

// "# nThread 1 nGpus 1 minBytes ..." plus the blocking note, ending with "#\n".
std::string format_config_header(const SweepConfig& c);
// `library_line` (e.g. "strata 0.1.0 transport ucx ranks 2") and one line per rank.
std::string format_rank_lines(std::string_view library_line, const std::vector<RankLine>& ranks);
// "#\n" and the three column-heading lines: nccl-tests' columns, then strata's wanB/rank.
std::string format_table_header();
// One result line, with its trailing newline.
std::string format_row(const ResultRow& row);
// Out-of-bounds count, average bus bandwidth, and the closing "#" line.
std::string format_footer(std::int64_t wrong, double avg_bus_bw);
// "# WAN bytes sent per rank per call: max X, mean Y (payload), wire overhead Z% (size S)"
// for the largest size among rows with WAN figures (the last such row), where payload
// dominates fixed costs; "" when no row has them.
std::string format_wan_summary(const std::vector<ResultRow>& rows);
// "# WAN path (rank 0's link): ..." or "" where the link has measured nothing (rtt 0).
std::string format_wan_path(double rtt_s, double srtt_s, double rate_bytes_per_s, int streams, double loss);

// nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, none above.
std::string format_time_us(double us);

// The average of busbw over every group of every row (both in- and out-of-place), as
// nccl-tests computes "Avg bus bandwidth"; 0 for no rows.
double average_bus_bw(const std::vector<ResultRow>& rows);
// The sum of #wrong over every checked group.
std::int64_t total_wrong(const std::vector<ResultRow>& rows);

// The run-level keys of the JSON document.
struct RunInfo {
  std::string tool;        // "strata-perf", "gloo-perf", ...
  std::string collective;  // nccl-tests name
  int ranks = 0;
  std::string transport;
  std::string dtype;  // as requested: a type name or "all"
  std::string op;     // as requested: an op name, "all" or "none"
};

// A JSON value whose object keys keep the order they were written in.
using Json = nlohmann::ordered_json;

// {"tool":..,"collective":..,"ranks":..,"transport":..,"dtype":..,"op":..,"results":[..],
//  "average_bus_bandwidth":..}; nwrong is null when unchecked, and wan_bytes_per_rank
// (WanBytes::mean) when not measured; a row's "algorithm" key only when it names one.
// Whole numbers are written as integers; NaN and infinity as null.
Json json_document(const RunInfo& info, const std::vector<ResultRow>& rows);
// A number as json_document writes it (programs adding keys write theirs alike).
Json json_number(double v);
// A document's text: compact, one element of "results" per line, ending with a newline,
// so results read and diff row by row.
std::string dump_document(const Json& doc);
// dump_document(json_document(info, rows)).
std::string format_json(const RunInfo& info, const std::vector<ResultRow>& rows);
// Writes format_json to `path`; returns false (errno set) when the file cannot be written.
bool write_json_file(const std::string& path, const RunInfo& info,
                     const std::vector<ResultRow>& rows);

}  // namespace strata::perf
