#include "base/sys_errors.hpp"

#include <sys/resource.h>

#include <cerrno>

#include <boost/asio/error.hpp>

#include "base/log.hpp"

namespace strata::sys {

bool out_of_descriptors(const boost::system::error_code& ec) {
  return ec == boost::system::errc::too_many_files_open ||
         ec == boost::system::errc::too_many_files_open_in_system;
}

std::uint64_t open_file_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  return rl.rlim_cur;
}

std::uint64_t raise_open_file_limit(std::uint64_t wanted) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= wanted) return rl.rlim_cur;
  const rlim_t target = rl.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, rl.rlim_max);
  if (target > rl.rlim_cur) {
    rlimit raised = rl;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return target;
  }
  return rl.rlim_cur;
}

std::string limit_note(const boost::system::error_code& ec) {
  if (ec == boost::system::errc::too_many_files_open) {
    const std::uint64_t limit = open_file_limit();
    return " (this process may have at most " + (limit ? std::to_string(limit) : std::string("an unknown number of")) +
           " open files: RLIMIT_NOFILE; every peer connection takes one or more, so raise it with 'ulimit -n' or "
           "the launcher's limits)";
  }
  if (ec == boost::system::errc::too_many_files_open_in_system)
    return " (the system-wide open-file table is full: fs.file-max)";
  return "";
}

std::string describe(const boost::system::error_code& ec) { return ec.message() + limit_note(ec); }

AcceptNext AcceptTrouble::after_error(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::operation_aborted || ec == boost::asio::error::bad_descriptor)
    return AcceptNext::stop;
  if (out_of_descriptors(ec) || ec == boost::system::errc::not_enough_memory ||
      ec == boost::system::errc::no_buffer_space) {
    if (since_ == Clock::time_point{}) {
      since_ = Clock::now();
      const std::string what = listener_ + " cannot accept connections: " + describe(ec);
      log::error(what + "; retrying");
      std::lock_guard<std::mutex> lock(mu_);
      what_ = what;
    }
    return AcceptNext::retry_later;
  }
  return AcceptNext::retry_now;  // e.g. the peer gave up before we accepted (ECONNABORTED)
}

}  // namespace strata::sys
