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
// code strata-perf prints with; the flags and report glue shared with
// strata-peer-gloo are in peer_common.cpp.

#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "peer_common.hpp"

namespace {

namespace perf = strata::perf;
namespace peers = strata::peers;

using Options = peers::SweepOptions;

int g_rank = 0;

void mpi_die(const std::string& msg) {
  if (g_rank == 0) std::fprintf(stderr, "strata-peer-mpi: %s\n", msg.c_str());
  int init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

void usage(const char* argv0) {
  if (g_rank != 0) return;
  std::printf("usage: mpirun [mpirun options] %s [options]\n%s", argv0, peers::sweep_usage("size").c_str());
}

Options parse_args(int argc, char** argv) {
  Options o;
  peers::ParseHooks hooks;
  hooks.on_help = [&] {
    usage(argv[0]);
    MPI_Finalize();
    std::exit(0);
  };
  hooks.on_bad_command_line = [&] {
    usage(argv[0]);
    peers::die("bad command line");
  };
  peers::parse_sweep_args(argc, argv, o, hooks);
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

// perf::format_json's document plus run-level keys.
std::string mpi_json(const perf::RunInfo& info, const std::vector<perf::ResultRow>& rows, const Options& o) {
  perf::Json doc = perf::json_document(info, rows);
  peers::add_run_keys(doc, o, perf::Json{{"mpi_library", library_version()}});
  return perf::dump_document(doc);
}

// ---------------------------------------------------------------------------
// MPI
// ---------------------------------------------------------------------------

void allreduce(const void* send, float* recv, size_t count) {
  int rc = MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) peers::die("MPI_Allreduce failed");
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
  const double factor = *perf::bus_bw_factor("all_reduce", nranks);
  std::vector<float> send(count), recv(count);
  perf::ResultRow row = peers::allreduce_row(count);
  const std::uint64_t bytes = row.size;

  // Out of place.
  peers::fill_pattern(send.data(), count, rank);
  double oop_us = time_op(o, [&] { allreduce(send.data(), recv.data(), count); });
  std::optional<std::int64_t> oop_wrong;
  if (o.check) {
    std::fill(recv.begin(), recv.end(), -1.0f);
    allreduce(send.data(), recv.data(), count);
    oop_wrong = sum_over_ranks(peers::count_wrong(recv.data(), count, nranks));
  }
  row.out_of_place = perf::make_timing(oop_us, bytes, factor, oop_wrong);

  // In place.
  peers::fill_pattern(recv.data(), count, rank);
  double ip_us = time_op(o, [&] { allreduce(MPI_IN_PLACE, recv.data(), count); });
  std::optional<std::int64_t> ip_wrong;
  if (o.check) {
    peers::fill_pattern(recv.data(), count, rank);
    allreduce(MPI_IN_PLACE, recv.data(), count);
    ip_wrong = sum_over_ranks(peers::count_wrong(recv.data(), count, nranks));
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
  peers::set_die_handler(&mpi_die);

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
    const std::string library = library_version() + " transport " + transport_label() + " ranks " +
                                std::to_string(nranks);
    peers::print_header(o, library, lines, "#  time: max over ranks of each rank's mean; MPI_Allreduce, blocking\n");
  }

  std::vector<perf::ResultRow> rows;
  peers::for_each_count(o, "size too large for an int count", [&](size_t count) {
    rows.push_back(run_size(o, count, rank, nranks));
    if (rank == 0) peers::print_row(rows.back());
  });
  const std::int64_t wrong = perf::total_wrong(rows);
  int rc = wrong == 0 ? 0 : 1;
  if (rank == 0) {
    peers::print_footer(wrong, rows);
    if (!o.json.empty()) {
      const perf::RunInfo info{"strata-peer-mpi", "all_reduce", nranks, transport_label(), "float", "sum"};
      if (!peers::write_json(o.json, mpi_json(info, rows, o), "strata-peer-mpi")) rc = 1;
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
