// A port each process listens on from its first communicator until it exits, whatever
// communicators come and go. A peer whose host refuses a connection to it knows that the
// process is gone, not merely moved on to a newer communicator (whose old control port
// is closed just the same): the difference between a rank that died and one that went on
// without this one on the other side of a partition (core/quorum.hpp). It accepts and
// closes, and reveals nothing but that the process lives.
#pragma once

#include "base/socket_settings.hpp"
#include <string>

namespace strata::bootstrap {

// "ip:port" of this process's port, listening on `host` (the wildcard of its family
// with bind_any; the first call's host: later ones get the same port). A child forked
// from this process gets a port of its own.
std::string liveness_address(const std::string& host, const net::SocketSettings& sockets);

}  // namespace strata::bootstrap
