// The harness's test cases. Each runs in forked children under a deadline and returns
// true on success; `version` picks the exported table (8..11) driven.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata::plugin_test {

struct CaseArgs {
  std::string plugin;  // path to libnccl-net-strata.so
  int version = 11;
  std::string interface = "lo";  // STRATA_NET_IF for both processes
  std::vector<std::pair<std::string, std::string>> env;  // extra, for both processes
};

bool case_exports(const CaseArgs& a);
bool case_devices(const CaseArgs& a);
bool case_misuse(const CaseArgs& a);
bool case_transfer(const CaseArgs& a);
bool case_crossregion(const CaseArgs& a);
bool case_crossregion_delay(const CaseArgs& a);
bool case_crossregion_cut(const CaseArgs& a);
bool case_crossregion_nat(const CaseArgs& a);
bool case_crossregion_idle(const CaseArgs& a);
bool case_limits(const CaseArgs& a);
bool case_close(const CaseArgs& a);
bool case_handshake(const CaseArgs& a);
bool case_crossregion_tls(const CaseArgs& a);
bool case_tls_refusals(const CaseArgs& a);

struct BenchArgs {
  std::size_t size = 4u << 20;
  double seconds = 5;
  int window = 8;  // receives (and sends) in flight, each receive into its own buffer
  // Distinct buffers the sender cycles through. 1 is how NCCL sends (out of one fixed
  // NCCL_BUFFSIZE staging buffer) and how iperf3 does (one -l buffer).
  int send_buffers = 1;
  std::string region0, region1;  // different: the striped path
  std::string netns0, netns1;
  std::string interface;  // empty: the plugin's own choice
};
bool run_bench(const CaseArgs& a, const BenchArgs& b);

}  // namespace strata::plugin_test
