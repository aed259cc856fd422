// strata-peer-mpi: float-sum MPI_Allreduce with the nccl-tests size-sweep
// flags, so that strata-perf can be compared against it.
//
// Launch with mpirun, choosing the path with BTLs, e.g. (as root, 2 cores):
//   mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1
//          --mca btl self,vader strata-peer-mpi -b 8 -e 256M -f 2
//   mpirun ... --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo ...
//
// Both out-of-place (separate send/receive buffers) and in-place
// (MPI_IN_PLACE) are timed. Tables and JSON come from strata_perf_report, the
// code strata-perf prints with.

#include <mpi.h>

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "perf_report.hpp"

namespace {

// ---------------------------------------------------------------------------
// nccl-tests-compatible options, sweep, table and JSON (kept in step with
// gloo_allreduce.cpp; both mirror the strata-perf output shape).
// ---------------------------------------------------------------------------

namespace perf = strata::perf;

struct Options {
  std::uint64_t min_bytes = 32u << 20;
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t step_bytes = 1u << 20;
  std::uint64_t step_factor = 1;
  int iters = 20;
  int warmup = 1;
  int check = 1;
  std::string json;
};

int g_rank = 0;

[[noreturn]] void die(const std::string& msg) {
  if (g_rank == 0) std::fprintf(stderr, "strata-peer-mpi: %s\n", msg.c_str());
  int init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Abort(MPI_COMM_WORLD, 2);
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

void usage(const char* argv0) {
  if (g_rank != 0) return;
  std::printf(
      "usage: mpirun [mpirun options] %s [options]\n"
      "  -b, --minbytes SIZE      smallest message (default 32M)\n"
      "  -e, --maxbytes SIZE      largest message (default 32M)\n"
      "  -i, --stepbytes SIZE     additive step when -f is not given (default 1M)\n"
      "  -f, --stepfactor N       multiplicative step\n"
      "  -n, --iters N            timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N     warm-up iterations (default 1)\n"
      "  -c, --check 0|1          validate results (default 1)\n"
      "  -d, --datatype float     only float is supported\n"
      "  -o, --op sum             only sum is supported\n"
      "      --json FILE          write results as JSON (rank 0)\n",
      argv0);
}

Options parse_args(int argc, char** argv) {
  Options o;
  enum { kJson = 1000 };
  static const struct option longopts[] = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},
      {"json", required_argument, nullptr, kJson},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:h", longopts, nullptr)) != -1) {
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
      case 'h': usage(argv[0]); MPI_Finalize(); std::exit(0);
      default: usage(argv[0]); die("bad command line");
    }
  }
  if (optind < argc) die(std::string("unexpected argument: ") + argv[optind]);
  if (o.iters < 1) die("-n must be >= 1");
  if (o.warmup < 0) die("-w must be >= 0");
  if (perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor).empty())
    die("the -b/-e/-i/-f sweep is empty");
  return o;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// What mpirun's --mca flags chose (mpirun exports them as OMPI_MCA_*).
std::string transport_label() {
  return "mpi pml=" + env_or("OMPI_MCA_pml", "default") + " btl=" + env_or("OMPI_MCA_btl", "default");
}

std::string library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(std::max(len, 0)));
  auto nl = s.find_first_of("\r\n,");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;
  }
  return out + "\"";
}

// perf::format_json's document plus run-level keys.
std::string mpi_json(const perf::RunInfo& info, const std::vector<perf::ResultRow>& rows, const Options& o) {
  std::string doc = perf::format_json(info, rows);
  const std::string top = "\"mpi_library\":" + json_str(library_version()) +
                          ",\"iters\":" + std::to_string(o.iters) +
                          ",\"warmup_iters\":" + std::to_string(o.warmup) +
                          ",\"check\":" + std::to_string(o.check) +
                          ",\"time_reduction\":\"max_over_ranks_of_mean\",";
  doc.insert(1, top);
  return doc;
}

// ---------------------------------------------------------------------------
// MPI
// ---------------------------------------------------------------------------

// Element i on rank r holds (r + 1) + (i % 7): small integers, so the float
// sum is exact and easy to predict.
void fill(float* buf, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

long count_wrong(const float* buf, size_t count, int n) {
  const float base = static_cast<float>(n * (n + 1) / 2);
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expect = base + static_cast<float>(n * static_cast<int>(i % 7));
    if (buf[i] != expect) ++wrong;
  }
  return wrong;
}

void allreduce(const void* send, float* recv, size_t count) {
  int rc = MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) die("MPI_Allreduce failed");
}

double max_over_ranks(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

std::int64_t sum_over_ranks(long v) {
  long out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

// Times `iters` calls of op after `warmup` untimed ones; returns the max over
// ranks of each rank's mean, in microseconds.
template <typename F>
double time_op(const Options& o, F&& op) {
  for (int i = 0; i < o.warmup; ++i) op();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o.iters; ++i) op();
  double t1 = MPI_Wtime();
  return max_over_ranks((t1 - t0) * 1e6 / o.iters);
}

perf::ResultRow run_size(const Options& o, size_t count, int rank, int nranks) {
  const std::uint64_t bytes = count * sizeof(float);
  const double factor = *perf::bus_bw_factor("all_reduce", nranks);
  std::vector<float> send(count), recv(count);
  perf::ResultRow row;
  row.size = bytes;
  row.count = count;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;

  // Out of place.
  fill(send.data(), count, rank);
  double oop_us = time_op(o, [&] { allreduce(send.data(), recv.data(), count); });
  std::optional<std::int64_t> oop_wrong;
  if (o.check) {
    std::fill(recv.begin(), recv.end(), -1.0f);
    allreduce(send.data(), recv.data(), count);
    oop_wrong = sum_over_ranks(count_wrong(recv.data(), count, nranks));
  }
  row.out_of_place = perf::make_timing(oop_us, bytes, factor, oop_wrong);

  // In place.
  fill(recv.data(), count, rank);
  double ip_us = time_op(o, [&] { allreduce(MPI_IN_PLACE, recv.data(), count); });
  std::optional<std::int64_t> ip_wrong;
  if (o.check) {
    fill(recv.data(), count, rank);
    allreduce(MPI_IN_PLACE, recv.data(), count);
    ip_wrong = sum_over_ranks(count_wrong(recv.data(), count, nranks));
  }
  row.in_place = perf::make_timing(ip_us, bytes, factor, ip_wrong);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  g_rank = rank;

  Options o = parse_args(argc, argv);

  // Rank lines: pid and host of every rank.
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  long pid = static_cast<long>(::getpid());
  std::vector<long> pids(static_cast<size_t>(nranks));
  std::vector<char> hosts(static_cast<size_t>(nranks) * MPI_MAX_PROCESSOR_NAME);
  MPI_Gather(&pid, 1, MPI_LONG, pids.data(), 1, MPI_LONG, 0, MPI_COMM_WORLD);
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
             MPI_COMM_WORLD);
  if (rank == 0) {
    std::vector<perf::RankLine> lines;
    for (int r = 0; r < nranks; ++r) {
      const char* h = hosts.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      lines.push_back(perf::RankLine{r, pids[static_cast<size_t>(r)],
                                     std::string(h, strnlen(h, MPI_MAX_PROCESSOR_NAME)), ""});
    }
    perf::SweepConfig sc{o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor, o.warmup, o.iters, o.check, 0};
    const std::string library = library_version() + " transport " + transport_label() + " ranks " +
                                std::to_string(nranks);
    std::fputs((perf::format_config_header(sc) + perf::format_rank_lines(library, lines) +
                "#  time: max over ranks of each rank's mean; MPI_Allreduce, blocking\n" +
                perf::format_table_header())
                   .c_str(),
               stdout);
    std::fflush(stdout);
  }

  std::vector<perf::ResultRow> rows;
  for (std::uint64_t size : perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor)) {
    const size_t count = static_cast<size_t>(size / sizeof(float));
    if (count == 0) continue;
    if (count > static_cast<size_t>(std::numeric_limits<int>::max())) die("size too large for an int count");
    rows.push_back(run_size(o, count, rank, nranks));
    if (rank == 0) {
      std::fputs(perf::format_row(rows.back()).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  const std::int64_t wrong = perf::total_wrong(rows);
  int rc = wrong == 0 ? 0 : 1;
  if (rank == 0) {
    std::fputs(perf::format_footer(wrong, perf::average_bus_bw(rows)).c_str(), stdout);
    std::fflush(stdout);
    if (!o.json.empty()) {
      const perf::RunInfo info{"strata-peer-mpi", "all_reduce", nranks, transport_label(), "float", "sum"};
      const std::string doc = mpi_json(info, rows, o);
      std::FILE* f = std::fopen(o.json.c_str(), "w");
      if (!f || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
        std::perror(("strata-peer-mpi: cannot write " + o.json).c_str());
        rc = 1;
      }
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
