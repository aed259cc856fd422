#include "peer_common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata::peers {

namespace {

void default_die(const std::string& msg) {
  std::fprintf(stderr, "strata-peer: %s\n", msg.c_str());
  std::exit(2);
}

DieHandler g_die = &default_die;

}  // namespace

void set_die_handler(DieHandler handler) { g_die = handler ? handler : &default_die; }

void die(const std::string& msg) {
  g_die(msg);
  std::exit(2);
}

std::uint64_t parse_size(const char* s) {
  auto v = perf::parse_size(s);
  if (!v) die(std::string("bad size: ") + s);
  return *v;
}

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0') die(std::string("bad ") + what + ": " + s);
  return static_cast<int>(v);
}

double parse_double(const char* s, const char* what) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0') die(std::string("bad ") + what + ": " + s);
  return v;
}

perf::SweepConfig SweepOptions::sweep_config() const {
  return perf::SweepConfig{min_bytes, max_bytes, step_bytes, step_factor, warmup, iters, check, 0};
}

void parse_sweep_args(int argc, char** argv, SweepOptions& o, const ParseHooks& hooks) {
  enum { kJson = kFirstExtraOption - 1 };
  std::vector<struct option> longopts = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},
      {"json", required_argument, nullptr, kJson}};
  longopts.insert(longopts.end(), hooks.extra_options.begin(), hooks.extra_options.end());
  longopts.push_back({"help", no_argument, nullptr, 'h'});
  longopts.push_back({nullptr, 0, nullptr, 0});

  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:h", longopts.data(), nullptr)) != -1) {
    switch (c) {
      case 'b': o.min_bytes = parse_size(optarg); break;
      case 'e': o.max_bytes = parse_size(optarg); break;
      case 'i': o.step_bytes = parse_size(optarg); break;
      case 'f': o.step_factor = static_cast<std::uint64_t>(std::max(1, parse_int(optarg, "step factor"))); break;
      case 'n': o.iters = parse_int(optarg, "iteration count"); break;
      case 'w': o.warmup = parse_int(optarg, "warm-up count"); break;
      case 'c': o.check = parse_int(optarg, "check flag"); break;
      case 'd':
        if (std::strcmp(optarg, "float") != 0) die("only -d float is supported");
        break;
      case 'o':
        if (std::strcmp(optarg, "sum") != 0) die("only -o sum is supported");
        break;
      case kJson: o.json = optarg; break;
      case 'h':
        if (hooks.on_help) hooks.on_help();
        std::exit(0);
      default:
        if (c >= kFirstExtraOption && hooks.on_extra) {
          hooks.on_extra(c, optarg);
          break;
        }
        if (hooks.on_bad_command_line) hooks.on_bad_command_line();
        std::exit(2);
    }
  }
  if (optind < argc) die(std::string("unexpected argument: ") + argv[optind]);
  if (o.iters < 1) die("-n must be >= 1");
  if (o.warmup < 0) die("-w must be >= 0");
  if (hooks.validate) hooks.validate();
  if (perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor).empty())
    die("the -b/-e/-i/-f sweep is empty");
}

std::string sweep_usage(const std::string& iters_scope) {
  return "  -b, --minbytes SIZE      smallest message (default 32M)\n"
         "  -e, --maxbytes SIZE      largest message (default 32M)\n"
         "  -i, --stepbytes SIZE     additive step when -f is not given (default 1M)\n"
         "  -f, --stepfactor N       multiplicative step\n"
         "  -n, --iters N            timed iterations per " +
         iters_scope +
         " (default 20)\n"
         "  -w, --warmup_iters N     warm-up iterations (default 1)\n"
         "  -c, --check 0|1          validate results (default 1)\n"
         "  -d, --datatype float     only float is supported\n"
         "  -o, --op sum             only sum is supported\n"
         "      --json FILE          write results as JSON (rank 0)\n";
}

void fill_pattern(float* buf, std::size_t count, int rank) {
  for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

long count_wrong(const float* buf, std::size_t count, int nranks) {
  const int n = nranks;
  const float base = static_cast<float>(n * (n + 1) / 2);
  long wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    float expect = base + static_cast<float>(n * static_cast<int>(i % 7));
    if (buf[i] != expect) ++wrong;
  }
  return wrong;
}

perf::ResultRow allreduce_row(std::size_t count) {
  perf::ResultRow row;
  row.size = count * sizeof(float);
  row.count = count;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  return row;
}

void print_header(const SweepOptions& o, const std::string& library, const std::vector<perf::RankLine>& lines,
                  const std::string& notes) {
  std::fputs((perf::format_config_header(o.sweep_config()) + perf::format_rank_lines(library, lines) + notes +
              perf::format_table_header())
                 .c_str(),
             stdout);
  std::fflush(stdout);
}

void print_row(const perf::ResultRow& row, const char* comment) {
  std::string line = perf::format_row(row);
  if (comment) {
    if (!line.empty() && line.back() == '\n') line.pop_back();
    line += std::string("  # ") + comment + "\n";
  }
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

void print_footer(std::int64_t wrong, const std::vector<perf::ResultRow>& rows) {
  std::fputs(perf::format_footer(wrong, perf::average_bus_bw(rows)).c_str(), stdout);
  std::fflush(stdout);
}

void add_run_keys(perf::Json& doc, const SweepOptions& o, const perf::Json& first) {
  perf::Json top = first;
  top["iters"] = o.iters;
  top["warmup_iters"] = o.warmup;
  top["check"] = o.check;
  top["time_reduction"] = "max_over_ranks_of_mean";
  for (auto it = doc.begin(); it != doc.end(); ++it) top[it.key()] = *it;
  doc = std::move(top);
}

bool write_json(const std::string& path, const std::string& doc, const char* program) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
    std::perror((std::string(program) + ": cannot write " + path).c_str());
    return false;
  }
  return true;
}

}  // namespace strata::peers
