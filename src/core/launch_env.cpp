#include "core/launch_env.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/config.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int parse_int(const char* name, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < 0 || v > (1 << 24))
    throw InvalidArgument(std::string(name) + "='" + value + "' is not a valid rank or size");
  return static_cast<int>(v);
}

std::string root_from_env(const std::string& source) {
  if (const char* r = env("STRATA_ROOT")) return r;
  const char* addr = env("MASTER_ADDR");
  const char* port = env("MASTER_PORT");
  if (addr && port) return std::string(addr) + ":" + port;
  throw InvalidArgument("rank and size come from " + source +
                        " but no rendezvous address is set: export STRATA_ROOT=host:port "
                        "(or MASTER_ADDR and MASTER_PORT) on every rank");
}

}  // namespace

LaunchInfo discover_launch() {
  struct Source {
    const char* rank;
    const char* size;
    const char* name;
  };
  static const Source sources[] = {
      {"STRATA_RANK", "STRATA_WORLD_SIZE", "STRATA_RANK/STRATA_WORLD_SIZE"},
      {"RANK", "WORLD_SIZE", "torchrun (RANK/WORLD_SIZE)"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
      {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
  };
  for (const auto& s : sources) {
    const char* r = env(s.rank);
    const char* n = env(s.size);
    if (!r && !n) continue;
    if (!r || !n)
      throw InvalidArgument(std::string(r ? s.size : s.rank) + " is not set but " +
                            (r ? s.rank : s.size) + " is");
    LaunchInfo info;
    info.rank = parse_int(s.rank, r);
    info.size = parse_int(s.size, n);
    info.source = s.name;
    if (info.size < 1 || info.rank >= info.size)
      throw InvalidArgument(std::string(s.rank) + "=" + r + " is not below " + s.size + "=" + n);
    info.root = root_from_env(info.source);
    return info;
  }
  throw InvalidArgument(
      "no launcher found: set STRATA_RANK, STRATA_WORLD_SIZE and STRATA_ROOT (or run under "
      "strata-run, torchrun, mpirun or srun)");
}

LaunchInfo discover_server_launch() {
  const char* r = env("STRATA_RANK");
  const char* n = env("STRATA_WORLD_SIZE");
  if (!r || !n)
    throw InvalidArgument("a dedicated server (STRATA_ROLE=server) needs STRATA_RANK (its index among the "
                          "servers) and STRATA_WORLD_SIZE (the number of workers)");
  LaunchInfo info;
  info.rank = parse_int("STRATA_RANK", r);
  info.size = parse_int("STRATA_WORLD_SIZE", n);
  info.source = "STRATA_ROLE=server";
  info.root = root_from_env(info.source);
  return info;
}

Locality local_locality() {
  Locality l;
  if (auto v = config::get(config::region); !v.empty()) l.region = v;
  if (auto v = config::get(config::cluster); !v.empty()) l.cluster = v;
  if (auto v = config::get(config::rack); !v.empty()) l.rack = v;
  if (auto v = config::get(config::host); !v.empty()) {
    l.host = v;
  } else {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    l.host = name;
  }
  return l;
}

bool is_server_role() {
  return config::get(config::role) == "server";
}

}  // namespace strata::detail
