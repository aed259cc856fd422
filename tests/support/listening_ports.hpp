// The TCP ports this process listens on, from its descriptors and the kernel's socket
// tables: what a firewall in front of it would have to open.
#pragma once

#include <set>

namespace strata::test {

std::set<unsigned> listening_ports();

}  // namespace strata::test
