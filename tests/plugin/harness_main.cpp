// strata-plugin-harness: loads libnccl-net-strata.so with dlopen and drives one exported
// ABI version through one case, in forked processes, the way NCCL would.
//
//   strata-plugin-harness --plugin PATH --version 8|9|10|11 --case NAME [--if lo] [--env K=V]...
//   cases: exports devices misuse transfer crossregion crossregion_delay crossregion_cut limits close handshake
//          bench
//   bench: [--size BYTES] [--seconds S] [--window N] [--send-buffers N] [--regions A,B]
//          [--netns A,B]   (one direction, role 0 -> role 1; prints Gbit/s)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>

#include "cases.hpp"

using namespace strata::plugin_test;

namespace {

std::pair<std::string, std::string> split(const std::string& s, char sep) {
  const auto at = s.find(sep);
  if (at == std::string::npos) return {s, s};
  return {s.substr(0, at), s.substr(at + 1)};
}

int usage() {
  std::fprintf(stderr,
               "usage: strata-plugin-harness --plugin PATH --version 8|9|10|11 --case NAME\n"
               "       [--if IFNAME] [--env K=V]... [--size B] [--seconds S] [--window N]\n"
               "       [--send-buffers N]\n"
               "       [--regions A,B] [--netns A,B]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CaseArgs a;
  BenchArgs b;
  std::string name;
  bool interface_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (arg == "--plugin") a.plugin = v;
    else if (arg == "--version") a.version = std::atoi(v.c_str());
    else if (arg == "--case") name = v;
    else if (arg == "--if") a.interface = v, interface_given = true;
    else if (arg == "--env") a.env.push_back(split(v, '='));
    else if (arg == "--size") b.size = std::strtoull(v.c_str(), nullptr, 0);
    else if (arg == "--seconds") b.seconds = std::atof(v.c_str());
    else if (arg == "--window") b.window = std::atoi(v.c_str());
    else if (arg == "--send-buffers") b.send_buffers = std::atoi(v.c_str());
    else if (arg == "--regions") std::tie(b.region0, b.region1) = split(v, ',');
    else if (arg == "--netns") std::tie(b.netns0, b.netns1) = split(v, ',');
    else return usage();
  }
  if (a.plugin.empty() || name.empty() || a.version < 8 || a.version > 11) return usage();
  if (interface_given) b.interface = a.interface;

  const std::map<std::string, std::function<bool()>> cases = {
      {"exports", [&] { return case_exports(a); }},
      {"devices", [&] { return case_devices(a); }},
      {"misuse", [&] { return case_misuse(a); }},
      {"transfer", [&] { return case_transfer(a); }},
      {"crossregion", [&] { return case_crossregion(a); }},
      {"crossregion_delay", [&] { return case_crossregion_delay(a); }},
      {"crossregion_cut", [&] { return case_crossregion_cut(a); }},
      {"crossregion_nat", [&] { return case_crossregion_nat(a); }},
      {"crossregion_idle", [&] { return case_crossregion_idle(a); }},
      {"limits", [&] { return case_limits(a); }},
      {"close", [&] { return case_close(a); }},
      {"handshake", [&] { return case_handshake(a); }},
      {"crossregion_tls", [&] { return case_crossregion_tls(a); }},
      {"tls_refusals", [&] { return case_tls_refusals(a); }},
      {"bench", [&] { return run_bench(a, b); }},
  };
  const auto it = cases.find(name);
  if (it == cases.end()) return usage();
  try {
    const bool pass = it->second();
    std::printf("%s v%d %s: %s\n", a.plugin.c_str(), a.version, name.c_str(), pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harness error: %s\n", e.what());
    return 1;
  }
}
