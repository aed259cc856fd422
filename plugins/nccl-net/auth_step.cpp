#include "auth_step.hpp"

#include <cstring>

#include "core/link_settings.hpp"
#include "errors.hpp"
#include "log.hpp"
#include "socket.hpp"
#include "strata/errors.hpp"

namespace strata::nccl_net {

namespace {

constexpr auto kChannel = bootstrap::auth::Channel::plugin;

bootstrap::auth::Bytes payload_of(const Hello& h) {
  const auto* p = reinterpret_cast<const unsigned char*>(&h);
  return bootstrap::auth::Bytes(p, p + sizeof h);
}

// Writes what is left of `bytes` from `*done`; true once all of it is out.
bool write_rest(int fd, const unsigned char* bytes, std::size_t n, std::size_t* done) {
  const iovec iov{const_cast<unsigned char*>(bytes) + *done, n - *done};
  *done += send_some(fd, &iov, 1);
  return *done == n;
}

// Reads what is left into `bytes`; true once all of it is in. *eof when the peer closed.
bool read_rest(int fd, unsigned char* bytes, std::size_t n, std::size_t* done, bool* eof) {
  *done += recv_some(fd, bytes + *done, n - *done, eof);
  return *done == n;
}

}  // namespace

DialAuth::DialAuth(const bootstrap::JobSecret& secret, const Hello& hello) : dialer_(secret, kChannel, payload_of(hello)) {}

bool DialAuth::step(int fd, const std::string& peer) {
  bool eof = false;
  if (phase_ == 0 && write_rest(fd, dialer_.hello().data(), dialer_.hello().size(), &sent_)) phase_ = 1;
  if (phase_ == 1) {
    if (read_rest(fd, challenge_.data(), challenge_.size(), &got_, &eof)) {
      auto proof = dialer_.answer(challenge_);
      if (!proof)
        throw NetError(abi::remote_error, "connecting to " + peer + ": " + dialer_.why() +
                                              " (is STRATA_JOB_SECRET the same on every rank?)");
      proof_ = std::move(*proof);
      sent_ = 0;
      phase_ = 2;
    } else if (eof) {
      throw NetError(abi::remote_error, "connecting to " + peer +
                                            ": the listener closed during the job's handshake (it does not know "
                                            "this job's secret, or runs a plugin without the handshake)");
    }
  }
  if (phase_ == 2 && write_rest(fd, proof_.data(), proof_.size(), &sent_)) phase_ = 3;
  return phase_ == 3;
}

AcceptAuth::AcceptAuth(const bootstrap::JobSecret& secret) : acceptor_(secret, kChannel, sizeof(Hello)) {}

AcceptAuth::State AcceptAuth::step(int fd) {
  bool eof = false;
  try {
    if (phase_ == 0) {
      const bool whole = read_rest(fd, first_.data(), first_.size(), &got_, &eof);
      std::uint32_t magic = 0;
      if (got_ >= sizeof magic) std::memcpy(&magic, first_.data(), sizeof magic);
      if (got_ >= sizeof magic && magic == Hello::kMagic) return State::older_plugin;
      if (!whole) {
        if (!eof) return State::pending;
        why_ = got_ ? "it closed part-way through its hello" : "it closed without a word";
        return State::refused;
      }
      const auto challenge = acceptor_.challenge(first_);
      if (!challenge) {
        why_ = acceptor_.why();
        return State::refused;
      }
      challenge_ = *challenge;
      sent_ = got_ = 0;
      phase_ = 1;
    }
    if (phase_ == 1) {
      if (!write_rest(fd, challenge_.data(), challenge_.size(), &sent_)) return State::pending;
      phase_ = 2;
    }
    if (!read_rest(fd, proof_.data(), proof_.size(), &got_, &eof)) {
      if (!eof) return State::pending;
      why_ = "it closed before its proof";
      return State::refused;
    }
  } catch (const NetError& e) {
    why_ = e.what();
    return State::refused;
  }
  const auto payload = acceptor_.verify(proof_);
  if (!payload) {
    why_ = acceptor_.why();
    return State::refused;
  }
  std::memcpy(&hello_, payload->data(), sizeof hello_);
  return State::proven;
}

const bootstrap::JobSecret& plugin_secret() {
  static const bootstrap::JobSecret secret = [] {
    try {
      if (auto s = detail::configured_secret()) return *s;
    } catch (const InvalidArgument& e) {
      throw NetError(abi::invalid_usage, e.what());
    }
    log::warn("no STRATA_JOB_SECRET: any process that reaches the plugin's ports can connect to it");
    return bootstrap::JobSecret{};
  }();
  return secret;
}

}  // namespace strata::nccl_net
