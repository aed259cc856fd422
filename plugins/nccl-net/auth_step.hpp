// The job's handshake (src/bootstrap/handshake.hpp) on the plugin's non-blocking sockets,
// one step per call, before any Hello is acted on: the Hello is the payload the dialer
// proves, so a stranger can neither open a connection to a listener nor rejoin a striped
// stream (which would replace a live socket). The secret is STRATA_JOB_SECRET(_FILE), set
// alike for every rank; without it the open key is used and init warns.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "bootstrap/handshake.hpp"
#include "handle.hpp"

namespace strata::nccl_net {

// The connecting side: hello, then the listener's challenge, then the proof (the Hello).
class DialAuth {
 public:
  DialAuth(const bootstrap::JobSecret& secret, const Hello& hello);
  // True once the proof is written. Throws NetError(remote_error) when the listener does
  // not know the secret or closes; `peer` names it.
  bool step(int fd, const std::string& peer);

 private:
  bootstrap::auth::Dialer dialer_;
  std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge_{};
  bootstrap::auth::Bytes proof_;
  std::size_t sent_ = 0, got_ = 0;
  int phase_ = 0;  // 0 hello, 1 challenge, 2 proof, 3 done
};

// The listening side. Nothing a stranger sends makes it throw: it is refused instead.
class AcceptAuth {
 public:
  explicit AcceptAuth(const bootstrap::JobSecret& secret);
  enum class State { pending, proven, refused, older_plugin };
  State step(int fd);
  const Hello& hello() const { return hello_; }  // once proven
  const std::string& why() const { return why_; }  // once refused
  bool started() const { return got_ > 0 || phase_ > 0; }

 private:
  bootstrap::auth::Acceptor acceptor_;
  std::array<unsigned char, bootstrap::auth::kHelloBytes> first_{};
  std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge_{};
  std::array<unsigned char, sizeof(Hello) + bootstrap::auth::kMacBytes> proof_{};
  Hello hello_{};
  std::string why_;
  std::size_t sent_ = 0, got_ = 0;
  int phase_ = 0;  // 0 hello, 1 challenge, 2 proof
};

// STRATA_JOB_SECRET(_FILE), or the open key (warned about once).
const bootstrap::JobSecret& plugin_secret();

}  // namespace strata::nccl_net
