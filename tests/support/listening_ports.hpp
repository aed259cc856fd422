// The TCP ports this process listens on, from its descriptors and the kernel's socket
// tables: what a firewall in front of it would have to open.
#pragma once

#include <set>
#include <string>

namespace strata::test {

std::set<unsigned> listening_ports();

// This process's established TCP connections, "local_port->remote_port", without
// SO_KEEPALIVE.
std::set<std::string> connections_without_keepalive();

}  // namespace strata::test
