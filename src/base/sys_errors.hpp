// Operating-system errors as a user can act on them. Running out of file descriptors is
// the one a job of many ranks meets first: the message names the limit and how to raise
// it instead of a bare "Too many open files".
#pragma once

#include <chrono>
#include <mutex>
#include <cstdint>
#include <string>

#include <boost/system/error_code.hpp>

namespace strata::sys {

// ec.message(), and for descriptor exhaustion the limit that was hit.
std::string describe(const boost::system::error_code& ec);
// What describe() adds to the message: "" unless descriptors ran out.
std::string limit_note(const boost::system::error_code& ec);
bool out_of_descriptors(const boost::system::error_code& ec);

// The soft RLIMIT_NOFILE of this process (0 when unknown).
std::uint64_t open_file_limit();
// Raises the soft RLIMIT_NOFILE to `wanted`, at most to the hard limit; returns the soft
// limit in force afterwards. Never lowers it.
std::uint64_t raise_open_file_limit(std::uint64_t wanted);

// A listener's accept errors. A closed listener stops; anything else is transient and
// must not end the accept loop for good: descriptor or memory exhaustion is retried after
// a pause (logged once per episode), other errors at once. An episode that lasts longer
// than `give_up_after` is persistent: the owner reports it instead of waiting on.
enum class AcceptNext { stop, retry_now, retry_later };
class AcceptTrouble {
 public:
  using Clock = std::chrono::steady_clock;
  explicit AcceptTrouble(std::string listener, std::chrono::milliseconds give_up_after = std::chrono::seconds(2))
      : listener_(std::move(listener)), give_up_after_(give_up_after) {}
  AcceptNext after_error(const boost::system::error_code& ec);
  void accepted() { since_ = Clock::time_point{}; }
  // The latest episode's message ("" if there never was one): kept after it ends, since
  // it may still explain a peer that gave up meanwhile. Any thread.
  std::string what() const {
    std::lock_guard<std::mutex> lock(mu_);
    return what_;
  }
  bool persistent(Clock::time_point now) const {
    return since_ != Clock::time_point{} && now - since_ > give_up_after_;
  }

 private:
  mutable std::mutex mu_;
  std::string listener_, what_;
  std::chrono::milliseconds give_up_after_;
  Clock::time_point since_{};  // start of the current episode
};

}  // namespace strata::sys
