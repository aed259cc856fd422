#include "case_support.hpp"

#include "plugin_api.hpp"

namespace strata::plugin_test {

using namespace std::chrono_literals;

PeerSetup setup(const CaseArgs& a, const std::string& region, Env more) {
  PeerSetup s;
  s.env = a.env;
  s.env.emplace_back("STRATA_NET_IF", a.interface);
  s.env.emplace_back("STRATA_REGION", region);
  for (auto& kv : more) s.env.push_back(std::move(kv));
  return s;
}

void ok(int rc, const char* what) {
  if (rc != 0) throw Failure(std::string(what) + " returned " + std::to_string(rc));
}

bool traffic_case(const CaseArgs& a, const PeerSetup& s0, const PeerSetup& s1, const PlanOptions& popt,
                  std::initializer_list<const char*> expect_logs) {
  return run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        Conn c = connect_pair(*net, ch, 0, 30s);
        exchange(*net, c, role, popt, DriveOptions{}, 0x5717A + static_cast<std::uint64_t>(a.version));
        ch.sync();
        close_conn(*net, c, role == 0 ? "lsr" : "rsl");
        for (const char* expect : expect_logs)
          if (!logged(expect)) throw Failure(std::string("the plugin never logged '") + expect + "'");
        return 0;
      },
      s0, s1, kTimeout);
}

bool crossregion_case(const CaseArgs& a, const Env& wan, int messages, double large_share,
                      std::initializer_list<const char*> expect_logs) {
  PlanOptions popt;
  popt.messages = messages;
  popt.large_share = large_share;
  return traffic_case(a, setup(a, "us-east", wan), setup(a, "eu-west", wan), popt, expect_logs);
}

}  // namespace strata::plugin_test
