// Include Boost.Asio through here: Boost 1.74's awaitable.hpp uses std::exchange without
// including <utility>, which GCC 12 in C++20 mode does not pull in by itself.
#pragma once

#include <utility>

#include <boost/asio.hpp>

#include <cstddef>
#include <limits>

namespace strata::net {

// Completion condition for asio::async_read / async_write that moves as much as the
// socket takes per system call. Their default (transfer_all) caps each call at 64 KiB,
// so a 512 KiB message cost eight sendmsg calls and eight trips through the reactor:
// with four ranks on two cores that doubled the CPU time of a 1 MiB allreduce.
inline std::size_t transfer_whole(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

}  // namespace strata::net
