// What keeps a long-lived TCP connection honest across middleboxes: the kernel's keepalive
// probes on an idle connection (which also refresh a NAT's or firewall's memory of the
// flow), and an end to one whose sent data stays unacknowledged too long (a flow a
// middlebox forgot and now drops silently), so that its owner dials again instead of
// TCP retrying into it for a quarter of an hour.
#pragma once

#include <chrono>

namespace strata::net {

// idle: keepalive probes after this long without traffic, a third of it apart, three
// unanswered ending the connection (0: none). unacked: the TCP_USER_TIMEOUT (0: the
// kernel's). Best effort: an option the socket refuses is left as it was.
void keep_alive(int fd, std::chrono::milliseconds idle, std::chrono::milliseconds unacked);

}  // namespace strata::net
