#include "netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace strata::test {

void run_command(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!f) throw std::runtime_error("cannot run: " + cmd);
  char buf[512];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  if (::pclose(f) != 0) throw std::runtime_error("'" + cmd + "' failed: " + out);
}

std::string NetnsPair::unavailable() {
  if (::geteuid() != 0) return "network namespaces need root";
  for (const char* tool : {"ip", "iptables"})
    if (std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) != 0)
      return std::string(tool) + " is not installed (scripts/setup-deps.sh installs it)";
  return "";
}

NetnsPair::NetnsPair() : subnet_(static_cast<int>(::getpid() % 200) + 20) {
  const std::string base = "strata" + std::to_string(::getpid());
  names_[0] = base + "a";
  names_[1] = base + "b";
  veth_[0] = "v" + std::to_string(::getpid()) + "a";
  veth_[1] = "v" + std::to_string(::getpid()) + "b";
  const auto& veth = veth_;
  for (const auto& n : names_) run_command("ip netns add " + n);
  try {
    run_command("ip link add " + veth[0] + " netns " + names_[0] + " type veth peer name " + veth[1] + " netns " + names_[1]);
    for (int s = 0; s < 2; ++s) {
      const std::string in = "ip -n " + names_[s] + " ";
      run_command(in + "link set lo up");
      run_command(in + "addr add " + address(s) + "/24 dev " + veth[s]);
      run_command(in + "link set " + veth[s] + " up");
    }
  } catch (...) {
    for (const auto& n : names_) std::system(("ip netns del " + n + " >/dev/null 2>&1").c_str());
    throw;
  }
}

NetnsPair::~NetnsPair() {
  for (const auto& n : names_) std::system(("ip netns del " + n + " >/dev/null 2>&1").c_str());
}

std::string NetnsPair::address(int side) const {
  return "10.77." + std::to_string(subnet_) + "." + std::to_string(side + 1);
}

void NetnsPair::enter(int side) const {
  const std::string path = "/var/run/netns/" + names_[side];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) throw std::runtime_error("cannot enter network namespace " + names_[side]);
  ::close(fd);
}

void NetnsPair::cut(bool on) const {
  const std::string op = on ? "-I" : "-D";
  const std::string b = "ip netns exec " + names_[1] + " iptables ";
  run_command(b + op + " INPUT -s " + address(0) + " -j DROP");
  run_command(b + op + " OUTPUT -d " + address(0) + " -j DROP");
}

void NetnsPair::forget_idle_flows(std::chrono::seconds idle, Forget how) const {
  const std::string b = "ip netns exec " + names_[1] + " ";
  run_command(b + "sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_established=" + std::to_string(idle.count()) +
              " net.netfilter.nf_conntrack_tcp_loose=0 net.netfilter.nf_conntrack_tcp_be_liberal=1");
  // A reset the rule itself sends is no known flow either: it must not be caught again.
  const std::string action = how == Forget::silently ? "-p tcp -m conntrack --ctstate INVALID -j DROP"
                                                     : "-p tcp ! --tcp-flags RST RST -m conntrack --ctstate INVALID "
                                                       "-j REJECT --reject-with tcp-reset";
  // Only the flows that cross: those between side 1's own processes do not meet it.
  run_command(b + "iptables -A INPUT -i " + veth_[1] + " " + action);
  run_command(b + "iptables -A OUTPUT -o " + veth_[1] + " " + action);
  // Conntrack starts tracking at the first rule that needs it: flows begun before then
  // would be unknown, so the rules go in before any rank starts.
}

std::string NetnsPair::private_address(int side) const {
  return "172.30." + std::to_string(subnet_) + "." + std::to_string(side + 1);
}

void NetnsPair::behind_nat(int side, const std::string& open) const {
  const std::string ns = names_[side], veth = veth_[side];
  // On an interface of its own (a veth pair inside the namespace: this kernel has no dummy
  // interfaces), so a process can pick it by name (the NCCL plugin's STRATA_NET_IF).
  run_command("ip -n " + ns + " link add priv0 type veth peer name priv1");
  run_command("ip -n " + ns + " addr add " + private_address(side) + "/32 dev priv0");
  run_command("ip -n " + ns + " link set priv1 up");
  run_command("ip -n " + ns + " link set priv0 up");
  // Connections side opens start from the private address, as on a host behind a NAT
  // box, and leave rewritten to the public one.
  run_command("ip -n " + ns + " route replace 10.77." + std::to_string(subnet_) + ".0/24 dev " + veth + " src " +
              private_address(side));
  const std::string ipt = "ip netns exec " + ns + " iptables ";
  run_command(ipt + "-t nat -A POSTROUTING -o " + veth + " -s " + private_address(side) + " -j MASQUERADE");
  run_command(ipt + "-t nat -A PREROUTING -i " + veth + " -p tcp -m multiport --dports " + open +
              " -j DNAT --to-destination " + private_address(side));
  run_command(ipt + "-A INPUT -i " + veth + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT");
  run_command(ipt + "-A INPUT -i " + veth + " -p tcp -m multiport --dports " + open + " -j ACCEPT");
  run_command(ipt + "-A INPUT -i " + veth + " -j DROP");
}

}  // namespace strata::test
