// Two network namespaces joined by a veth pair, for tests of what crosses a network on
// one machine (README, "The machine and its limits"): made with iproute2, removed with
// their links when destroyed. Between them a test can cut every packet (a partition) or
// put a middlebox that forgets idle flows. Needs root; unavailable() says why not.
#pragma once

#include <chrono>
#include <string>

namespace strata::test {

class NetnsPair {
 public:
  // Why the pair cannot be made here ("" when it can): not root, no `ip` or `iptables`.
  static std::string unavailable();

  NetnsPair();   // throws std::runtime_error naming the command that failed
  ~NetnsPair();  // removes both namespaces (and with them the veth pair and their rules)
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // side 0 or 1
  const std::string& name(int side) const { return names_[side]; }
  const std::string& interface(int side) const { return veth_[side]; }  // its veth's name
  std::string address(int side) const;  // its veth's IPv4 address
  // In a forked child, before it opens any socket: moves the process into side's namespace.
  void enter(int side) const;

  // A partition: every packet between the two sides dropped, silently, or let through again.
  void cut(bool on) const;
  // A middlebox on side 1 that forgets a flow idle for `idle`; established flows are not
  // picked up again. It drops their next packets silently (as most NATs and firewalls do),
  // or answers them with a reset (as some cloud NAT gateways do).
  enum class Forget { silently, with_reset };
  void forget_idle_flows(std::chrono::seconds idle, Forget how) const;

  // Puts side's processes behind NAT and a firewall, as in a cloud region: they get a
  // private address of their own (private_address(side), on interface "priv0": no route
  // from the other side reaches it); what arrives on the veth for the TCP ports `open`
  // (iptables multiport syntax, "40000:40100,29001") is forwarded to it (DNAT, ports
  // unchanged); anything else arriving is dropped, unless it belongs to a flow side
  // began. Connections side opens start from the private address and leave
  // masqueraded as address(side), which plays the region's public address.
  void behind_nat(int side, const std::string& open) const;
  std::string private_address(int side) const;

 private:
  std::string names_[2];
  std::string veth_[2];
  int subnet_;
};

// Runs a shell command; throws std::runtime_error with its output when it fails.
void run_command(const std::string& cmd);

}  // namespace strata::test
