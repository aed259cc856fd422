// Shared parts of the peer benchmarks (strata-peer-gloo, strata-peer-mpi):
// the nccl-tests sweep flags, the size sweep, the float-sum fill/check
// pattern, and the table/JSON glue around strata_perf_report.
//
// What differs per library (how to exit on error, extra flags, timing and the
// collective itself) comes in through the hooks below.

#pragma once

#include <getopt.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "perf_report.hpp"

namespace strata::peers {

namespace perf = strata::perf;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Prints the message the program's way and ends the run; must not return.
using DieHandler = void (*)(const std::string& msg);

// Installs the program's handler (default: "strata-peer: MSG" on stderr, exit 2).
void set_die_handler(DieHandler handler);

// Calls the handler; exits with status 2 should it return.
[[noreturn]] void die(const std::string& msg);

// Parsers that die with "bad WHAT: TEXT" (or "bad size: TEXT").
std::uint64_t parse_size(const char* s);
int parse_int(const char* s, const char* what);
double parse_double(const char* s, const char* what);

// ---------------------------------------------------------------------------
// nccl-tests sweep flags
// ---------------------------------------------------------------------------

struct SweepOptions {
  std::uint64_t min_bytes = 32u << 20;
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t step_bytes = 1u << 20;
  std::uint64_t step_factor = 1;
  int iters = 20;
  int warmup = 1;
  int check = 1;
  std::string json;

  // The strata-perf header's view of the sweep.
  perf::SweepConfig sweep_config() const;
};

// Long-option codes from here up are free for a program's own flags.
inline constexpr int kFirstExtraOption = 1001;

struct ParseHooks {
  // The program's own long options (codes >= kFirstExtraOption).
  std::vector<struct option> extra_options;
  // Handles one of them; optarg is null for no_argument options.
  std::function<void(int code, const char* optarg)> on_extra;
  // Checks on the program's own flags, run after -n/-w and before the sweep check.
  std::function<void()> validate;
  // -h/--help (prints usage and exits 0) and a bad flag (exits 2); exit(0) or
  // exit(2) follows should either return.
  std::function<void()> on_help;
  std::function<void()> on_bad_command_line;
};

// getopt_long over -b -e -i -f -n -w -c -d -o --json -h plus the hooks' options.
void parse_sweep_args(int argc, char** argv, SweepOptions& o, const ParseHooks& hooks);

// The usage lines of the common flags; iters_scope follows "timed iterations
// per " in the -n line (e.g. "size").
std::string sweep_usage(const std::string& iters_scope);

// Float elements of every size in the sweep, smallest first: sizes below one
// float are skipped, a count past INT_MAX dies with too_large. Runs body(count)
// for each, in order, before looking at the next size.
template <typename Body>
void for_each_count(const SweepOptions& o, const std::string& too_large, Body&& body);

// ---------------------------------------------------------------------------
// Float-sum data pattern
// ---------------------------------------------------------------------------

// Element i on rank r holds (r + 1) + (i % 7): small integers, so the float
// sum is exact and easy to predict.
void fill_pattern(float* buf, std::size_t count, int rank);

// Elements of buf that differ from the sum of the pattern over nranks ranks.
long count_wrong(const float* buf, std::size_t count, int nranks);

// A float-sum all_reduce row of count elements, with no timings yet.
perf::ResultRow allreduce_row(std::size_t count);

// ---------------------------------------------------------------------------
// Reporting (rank 0)
// ---------------------------------------------------------------------------

// Config header, rank lines, the program's notes ("#  ..." lines) and the
// table header, on stdout.
void print_header(const SweepOptions& o, const std::string& library, const std::vector<perf::RankLine>& lines,
                  const std::string& notes);

// One table row; a comment, when given, goes after it as "  # COMMENT".
void print_row(const perf::ResultRow& row, const char* comment = nullptr);

void print_footer(std::int64_t wrong, const std::vector<perf::ResultRow>& rows);

// Puts `first`'s keys, then the sweep's (iters, warmup_iters, check, time_reduction),
// ahead of the document's own.
void add_run_keys(perf::Json& doc, const SweepOptions& o, const perf::Json& first);

// Writes doc to path; on failure prints "PROGRAM: cannot write PATH: ERROR"
// and returns false.
bool write_json(const std::string& path, const std::string& doc, const char* program);

// ---------------------------------------------------------------------------

template <typename Body>
void for_each_count(const SweepOptions& o, const std::string& too_large, Body&& body) {
  for (std::uint64_t size : perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor)) {
    const std::size_t count = static_cast<std::size_t>(size / sizeof(float));
    if (count == 0) continue;
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) die(too_large);
    body(count);
  }
}

}  // namespace strata::peers
