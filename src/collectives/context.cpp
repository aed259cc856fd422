#include "collectives/context.hpp"

#include <algorithm>
#include <set>

#include "collectives/dispatch.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

Group Group::world(int rank, int size) {
  Group g;
  g.ranks.resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) g.ranks[static_cast<std::size_t>(i)] = i;
  g.me = rank;
  return g;
}

const Chooser& Context::chooser() const { return p_.chooser ? *p_.chooser : threshold_chooser(); }

void* Scratch::get(int slot, std::size_t bytes) {
  auto& b = blocks_[slot];
  if (b.size < bytes) {
    // Grow geometrically so a sweep of sizes reallocates only a few times.
    const std::size_t n = std::max(bytes, b.size * 2);
    b.data.reset(new (std::align_val_t(64)) char[n]);
    b.size = n;
  }
  return b.data.get();
}

RequestPtr Context::send(int peer, Channel ch, const void* buf, std::size_t bytes) {
  return p_.transport->isend(peer, transport::collective_tag(p_.seq, ch), buf, bytes);
}

RequestPtr Context::recv(int peer, Channel ch, void* buf, std::size_t bytes) {
  return p_.transport->irecv(peer, transport::collective_tag(p_.seq, ch), buf, bytes);
}

RequestPtr Context::send_tagged(int peer, transport::Tag tag, const void* buf, std::size_t bytes) {
  return p_.transport->isend(peer, tag, buf, bytes);
}

RequestPtr Context::recv_tagged(int peer, transport::Tag tag, void* buf, std::size_t bytes) {
  return p_.transport->irecv(peer, tag, buf, bytes);
}

void Context::check_stamp(int peer, const std::string& theirs) {
  if (theirs == p_.stamp) return;
  if (p_.stamp_mismatch) p_.stamp_mismatch(peer, theirs);
  throw MismatchError("collective mismatch: " + p_.what + " on rank " + std::to_string(my_rank()) + ", but rank " +
                      std::to_string(peer) + " called another collective");
}

char* Context::shared_slot(int r) {
  try {
    return p_.transport->shared_slot(r);
  } catch (const TransportError& e) {
    throw TransportError(p_.what + " on rank " + std::to_string(my_rank()) + ": " + e.what());
  }
}

std::size_t Context::shared_slot_bytes() const { return p_.transport->shared_slot_bytes(); }

void Context::wait(const RequestPtr& r) { wait_all({r}); }

std::size_t Context::wait_bytes(const RequestPtr& r) {
  wait(r);
  return r->bytes();
}

void Context::expect_bytes(const RequestPtr& r, std::size_t bytes) {
  if (r->bytes() == bytes) return;
  if (p_.guard) p_.guard(true);
  throw TransportError(p_.what + " on rank " + std::to_string(my_rank()) + ": rank " +
                       std::to_string(r->peer()) + " sent " + std::to_string(r->bytes()) +
                       " bytes where " + std::to_string(bytes) + " were expected");
}

void Context::wait_all(const std::vector<RequestPtr>& rs) {
  // Wake up now and then to run the consistency check, so that a mismatch that would
  // otherwise hang (e.g. different counts) is reported within a fraction of a second;
  // much more often when background stages need their next step posted.
  const auto slice = background_ ? std::chrono::microseconds(200) : std::chrono::microseconds(100'000);
  for (;;) {
    bool finished = false;
    try {
      finished = transport::wait_all(*p_.transport, rs, std::min(p_.deadline, Clock::now() + slice));
    } catch (const TransportError& e) {
      if (p_.guard) p_.guard(true);  // a size error is usually a mismatch: say so if it is
      throw TransportError(p_.what + " on rank " + std::to_string(my_rank()) + ": " + e.what());
    }
    if (background_) background_();
    if (p_.guard) p_.guard(false);
    if (finished) return;
    if (Clock::now() >= p_.deadline) {
      std::set<int> waiting;
      for (const auto& r : rs)
        if (!r->done()) waiting.insert(r->peer());
      std::string peers;
      for (int w : waiting) peers += (peers.empty() ? "" : ", ") + std::to_string(w);
      throw_timeout("rank(s) " + peers);
    }
  }
}

void Context::wait_until(const std::function<bool()>& done, const std::string& waiting_for) {
  for (unsigned round = 0;; ++round) {
    if (background_) background_();
    if (done()) return;
    if (p_.transport->aborted()) throw AbortedError(p_.transport->abort_reason());
    if (!p_.transport->progress() && round % 8 == 7) {
      if (p_.guard) p_.guard(false);
      if (Clock::now() >= p_.deadline) throw_timeout(waiting_for);
      p_.transport->wait_event(std::chrono::microseconds(200));
    }
  }
}

void Context::throw_timeout(const std::string& waiting_for) {
  throw TimeoutError(transport::with_trouble(*p_.transport, p_.what + " timed out on rank " +
                                                                std::to_string(my_rank()) + " waiting for " +
                                                                waiting_for +
                                                                " (deadline from STRATA_TIMEOUT_S or the call's timeout)"));
}

}  // namespace strata::collectives
