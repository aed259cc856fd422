#include "core/peer_health.hpp"

#include <algorithm>

#include "strata/errors.hpp"

namespace strata::detail {

namespace {

// An error of the class `code` names, as another rank saw it.
std::exception_ptr error_of(int code, const std::string& text) {
  switch (static_cast<ErrorCode>(code)) {
    case ErrorCode::mismatch: return std::make_exception_ptr(MismatchError(text));
    case ErrorCode::timeout: return std::make_exception_ptr(TimeoutError(text));
    case ErrorCode::transport: return std::make_exception_ptr(TransportError(text));
    default: return std::make_exception_ptr(AbortedError(text));
  }
}

std::string prefixed(const std::string& what, const std::string& text) {
  return what.empty() ? text : what + ": " + text;
}

}  // namespace

bool PeerHealth::lose(int rank, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : lost_)
      if (l.rank == rank) return false;
    lost_.push_back(Loss{rank, why});
  }
  cv_.notify_all();
  return true;
}

void PeerHealth::report(const bootstrap::ControlNotice& n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reported_) return;
    reported_ = n;
  }
  cv_.notify_all();
}

bool PeerHealth::any() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !lost_.empty() || reported_.has_value();
}

std::vector<int> PeerHealth::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (const auto& l : lost_) out.push_back(l.rank);
  std::sort(out.begin(), out.end());
  return out;
}

std::exception_ptr PeerHealth::verdict_locked(const std::string& what, const std::string& hint) const {
  if (!lost_.empty()) {
    std::vector<int> ranks;
    std::string text;
    for (const auto& l : lost_) {
      ranks.push_back(l.rank);
      if (!text.empty()) text += "; ";
      text += l.rank == rank_ ? "this rank (" + std::to_string(rank_) + ") was declared lost: " + l.why
                              : "rank " + std::to_string(l.rank) + " was lost: " + l.why;
    }
    std::sort(ranks.begin(), ranks.end());
    return std::make_exception_ptr(PeerLostError(prefixed(what, text), std::move(ranks)));
  }
  if (reported_)
    return error_of(reported_->code, prefixed(what, "rank " + std::to_string(reported_->from) +
                                                        " reported a failure of collective #" +
                                                        std::to_string(reported_->seq) + ": " + reported_->text +
                                                        (hint.empty() || reported_->code != static_cast<int>(ErrorCode::timeout)
                                                             ? ""
                                                             : "; " + hint)));
  return nullptr;
}

std::exception_ptr PeerHealth::explain(const std::string& what, std::exception_ptr symptom,
                                       std::chrono::milliseconds grace, bool* from_here,
                                       const std::string& hint) const {
  if (from_here) *from_here = false;
  bool transient = false;
  try {
    std::rethrow_exception(symptom);
  } catch (const PeerLostError&) {
    return symptom;
  } catch (const MismatchError&) {
    if (from_here) *from_here = true;
    return symptom;
  } catch (const InvalidArgument&) {
    return symptom;
  } catch (const TransportError&) {
    transient = true;
  } catch (...) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (transient) cv_.wait_for(lock, grace, [&] { return !lost_.empty() || reported_.has_value(); });
  if (auto v = verdict_locked(what, hint)) return v;
  if (from_here) *from_here = true;
  return symptom;
}

std::exception_ptr PeerHealth::verdict(const std::string& what) const {
  std::lock_guard<std::mutex> lock(mu_);
  return verdict_locked(what);
}

}  // namespace strata::detail
