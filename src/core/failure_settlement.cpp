#include "core/failure_settlement.hpp"

#include "base/log.hpp"

namespace strata::detail {

namespace {

// How long a collective that saw a connection fail waits for the control mesh to say
// why: a dead peer's data links and control connection close at about the same moment.
constexpr auto kExplainGrace = std::chrono::milliseconds(500);

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code();
  } catch (...) {
    return ErrorCode::internal;
  }
}

}  // namespace

void FailureSettlement::attach(bootstrap::ControlMesh* mesh, transport::Transport* transport) {
  mesh_ = mesh;
  transport_ = transport;
}

void FailureSettlement::check_usable() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  const std::string what = "communicator on rank " + std::to_string(rank_) + " is unusable";
  // A failure another rank saw keeps its class here: a mismatch or a loss reported
  // before this rank even reached the collective is still one.
  if (auto verdict = health_.verdict(what)) std::rethrow_exception(verdict);
  std::lock_guard<std::mutex> lock(mu_);
  throw AbortedError(what + " after an earlier failure: " + failure_);
}

std::exception_ptr FailureSettlement::on_error(const std::exception_ptr& e) {
  if (e == settled_) return e;  // a collective's, settled where it failed
  return settle("", 0, e);
}

std::exception_ptr FailureSettlement::settle(const std::string& what, std::uint64_t seq,
                                             const std::exception_ptr& symptom, const std::string& hint) {
  bool news = false;
  auto err = health_.explain(what, symptom, kExplainGrace, &news, hint);
  const std::string text = message_of(err);
  // Before the transport closes, so that peers hear why before they see it close.
  if (news && !failed_.load(std::memory_order_acquire)) tell_everyone(code_of(err), seq, text);
  fail_all(text);
  log::warn(text);
  settled_ = err;
  return err;
}

void FailureSettlement::tell_everyone(ErrorCode code, std::uint64_t seq, const std::string& text,
                                      std::vector<int> lost) {
  bootstrap::ControlNotice n;
  n.from = rank_;
  n.code = static_cast<int>(code);
  n.seq = seq;
  n.lost = std::move(lost);
  n.text = text;
  if (mesh_) mesh_->broadcast(n);
}

void FailureSettlement::fail_all(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.load()) failure_ = why;
    failed_.store(true, std::memory_order_release);
  }
  // Stop all traffic so no late message can land in a buffer the caller owns again.
  if (transport_) transport_->abort(why);
}

void FailureSettlement::on_peer_lost(int r, const std::string& why) {
  if (!health_.lose(r, why)) return;
  const std::string text = "rank " + std::to_string(r) + " was lost: " + why;
  log::warn(text);
  // Every survivor's mesh sees a death itself, but only neighbours see a silence; and a
  // partition may hide either from some. One notice per finder settles it for everyone.
  tell_everyone(ErrorCode::peer_lost, 0, why, {r});
  fail_all(text);
}

void FailureSettlement::on_notice(const bootstrap::ControlNotice& n) {
  const std::string by = "rank " + std::to_string(n.from);
  if (n.code == static_cast<int>(ErrorCode::peer_lost)) {
    bool news = false;
    for (int r : n.lost) news = health_.lose(r, by + " found: " + n.text) || news;
    if (news) fail_all(by + " reports lost rank(s): " + n.text);
    return;
  }
  health_.report(n);
  fail_all(by + " reported a failure: " + n.text);
}

void FailureSettlement::abort(const std::string& why) {
  if (!failed_.load(std::memory_order_acquire)) tell_everyone(ErrorCode::aborted, 0, why);
  fail_all(why);
}

}  // namespace strata::detail
