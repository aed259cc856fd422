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

Scratch& Scratch::lane(std::size_t i) {
  while (lanes_.size() <= i) lanes_.push_back(std::make_unique<Scratch>());
  return *lanes_[i];
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

// The driver behind a context and its lanes: the work suspended on requests, and the
// first failure of work that nobody awaits yet. One per thread, as a thread drives one
// call at a time; it keeps its list's memory from call to call.
struct Context::Driver {
  std::vector<WaitFor*> parked;  // in the order they suspended
  std::vector<WaitFor*> ready;   // drive()'s, kept to spare the polling loop allocations
  std::exception_ptr unawaited_error;
};

Context::Context(Params p) : p_(std::move(p)) {
  static thread_local Driver driver;
  driver_ = &driver;
}

Context Context::lane(std::size_t i) const {
  Context c(*this);
  c.p_.scratch = &p_.scratch->lane(i);
  return c;
}

WaitFor::~WaitFor() {
  // A piece of work destroyed while suspended (its caller failed) stops waiting.
  if (!parked_) return;
  auto& parked = ctx_->driver_->parked;
  parked.erase(std::find(parked.begin(), parked.end(), this));
}

void WaitFor::await_suspend(std::coroutine_handle<> h) {
  h_ = h;
  parked_ = true;
  ctx_->driver_->parked.push_back(this);
}

WaitFor Context::wait(RequestPtr r) { return WaitFor(*this, std::move(r)); }
WaitFor Context::wait(RequestPtr a, RequestPtr b) { return WaitFor(*this, std::move(a), std::move(b)); }
WaitFor Context::wait_all(std::vector<RequestPtr> rs) { return WaitFor(*this, std::move(rs)); }

void Context::expect_bytes(const RequestPtr& r, std::size_t bytes) {
  if (r->bytes() == bytes) return;
  if (p_.guard) p_.guard(true);
  throw TransportError(p_.what + " on rank " + std::to_string(my_rank()) + ": rank " +
                       std::to_string(r->peer()) + " sent " + std::to_string(r->bytes()) +
                       " bytes where " + std::to_string(bytes) + " were expected");
}

void Context::start(Steps& s) { s.start(&driver_->unawaited_error); }

void Context::run(Steps s) {
  driver_->unawaited_error = nullptr;
  s.start();
  while (!s.done()) {
    if (auto e = std::exchange(driver_->unawaited_error, nullptr)) std::rethrow_exception(e);
    drive();
  }
  s.rethrow();
}

void Context::finish(std::vector<RequestPtr> rs) {
  run([](Context& ctx, std::vector<RequestPtr> reqs) -> Steps { co_await ctx.wait_all(std::move(reqs)); }(
      *this, std::move(rs)));
}

void Context::resume(WaitFor* w) {
  auto& parked = driver_->parked;
  const auto it = std::find(parked.begin(), parked.end(), w);
  if (it == parked.end()) return;  // its work was destroyed by an earlier resumption
  parked.erase(it);
  w->parked_ = false;
  w->h_.resume();
}

void Context::rethrow_failed_request(const TransportError& e) {
  if (p_.guard) p_.guard(true);  // a size error is usually a mismatch: say so if it is
  throw TransportError(p_.what + " on rank " + std::to_string(my_rank()) + ": " + e.what());
}

void Context::drive() {
  auto& parked = driver_->parked;
  if (parked.empty()) throw std::logic_error(p_.what + ": work suspended on something other than a request");
  if (parked.size() == 1) {
    // One piece of work: block in the transport's wait (spin, then sleep), waking now
    // and then to run the consistency check, so that a mismatch that would otherwise
    // hang (e.g. different counts) is reported within a fraction of a second.
    WaitFor* w = parked.front();
    bool finished = false;
    try {
      finished = transport::wait_all(*p_.transport, w->reqs_,
                                     std::min(p_.deadline, Clock::now() + std::chrono::milliseconds(100)));
    } catch (const TransportError& e) {
      rethrow_failed_request(e);
    }
    if (p_.guard) p_.guard(false);
    if (finished) return resume(w);
  } else {
    // Several in flight (a pipeline's stages): poll them all, resume whichever is ready.
    const bool moved = p_.transport->progress();
    if (p_.transport->aborted()) throw AbortedError(p_.transport->abort_reason());
    auto& ready = driver_->ready;
    ready.clear();
    for (WaitFor* w : parked) {
      bool all = true;
      for (const auto& r : w->reqs_) {
        if (!r->done()) {
          all = false;
        } else if (!r->error().empty()) {
          rethrow_failed_request(TransportError(r->error()));
        }
      }
      if (all) ready.push_back(w);
    }
    for (WaitFor* w : ready) resume(w);
    if (!ready.empty() || moved) return;
    if (p_.guard) p_.guard(false);
    p_.transport->wait_event(std::chrono::microseconds(200));
  }
  if (Clock::now() < p_.deadline) return;
  std::set<int> waiting;
  for (const WaitFor* w : parked)
    for (const auto& r : w->reqs_)
      if (!r->done()) waiting.insert(r->peer());
  std::string peers;
  for (int w : waiting) peers += (peers.empty() ? "" : ", ") + std::to_string(w);
  throw_timeout("rank(s) " + peers);
}

void Context::throw_timeout(const std::string& waiting_for) {
  throw TimeoutError(transport::with_trouble(*p_.transport, p_.what + " timed out on rank " +
                                                                std::to_string(my_rank()) + " waiting for " +
                                                                waiting_for +
                                                                " (deadline from STRATA_TIMEOUT_S or the call's timeout)"));
}

}  // namespace strata::collectives
