#include "ps/shard_server.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>

#include "kernels/reduce.hpp"
#include "strata/errors.hpp"

namespace strata::ps {

using transport::Clock;
using transport::RequestPtr;

ShardServer::ShardServer(transport::Transport& t, int workers, int index, int servers,
                         std::chrono::milliseconds timeout)
    : t_(t), workers_(workers), index_(index), servers_(servers), timeout_(timeout) {
  headers_.resize(static_cast<std::size_t>(workers));
  replies_.resize(static_cast<std::size_t>(workers));
}

ServerStats ShardServer::run() {
  const auto W = static_cast<std::size_t>(workers_);
  std::vector<RequestPtr> next(W);
  auto post_headers = [&] {
    for (int w = 0; w < workers_; ++w)
      next[static_cast<std::size_t>(w)] =
          t_.irecv(w, tag(Stream::header), &headers_[static_cast<std::size_t>(w)], sizeof(PushHeader));
  };
  post_headers();
  for (;;) {
    wait_for_headers(next);
    int closed = 0;
    for (int w = 0; w < workers_; ++w) {
      const PushHeader& h = headers_[static_cast<std::size_t>(w)];
      if (next[static_cast<std::size_t>(w)]->bytes() != sizeof h || !h.valid())
        throw TransportError("server " + std::to_string(index_) + ": worker " + std::to_string(w) +
                            " sent a malformed request (a different strata version?)");
      closed += h.op == Op::close;
    }
    if (closed == workers_) return stats_;
    const std::string why = disagreement();
    if (closed)
      throw TransportError("server " + std::to_string(index_) + ": some workers closed their communicator while " +
                           "others started a collective: " + why);
    // The next headers may arrive while this collective runs; serve from a copy.
    const std::vector<PushHeader> current = headers_;
    if (why.empty()) {
      post_headers();
      serve(current.front());
    } else {
      refuse(why);
      post_headers();
    }
  }
}

void ShardServer::wait_for_headers(std::vector<RequestPtr>& reqs) {
  // Workers may sit between steps for as long as they like; once one has started a
  // collective, the rest have the communicator's timeout to follow.
  std::optional<Clock::time_point> started;
  for (;;) {
    if (transport::wait_all(t_, reqs, Clock::now() + std::chrono::seconds(1))) return;
    const bool any = std::any_of(reqs.begin(), reqs.end(), [](const RequestPtr& r) { return r->done(); });
    if (any && !started) started = Clock::now();
    if (started && Clock::now() - *started > timeout_) {
      std::string late;
      for (int w = 0; w < workers_; ++w)
        if (!reqs[static_cast<std::size_t>(w)]->done()) late += (late.empty() ? "" : ", ") + std::to_string(w);
      throw TimeoutError("server " + std::to_string(index_) + ": worker(s) " + late +
                         " did not start the collective the others started within " +
                         std::to_string(timeout_.count() / 1000.0) + " s (STRATA_TIMEOUT_S)");
    }
  }
}

void ShardServer::wait(const std::vector<RequestPtr>& reqs, const std::string& what) {
  try {
    if (transport::wait_all(t_, reqs, Clock::now() + timeout_)) return;
  } catch (const TransportError& e) {
    throw TransportError("server " + std::to_string(index_) + ", " + what + ": " + e.what());
  }
  throw TimeoutError("server " + std::to_string(index_) + ": " + what + " did not finish within " +
                     std::to_string(timeout_.count() / 1000.0) + " s (STRATA_TIMEOUT_S)");
}

std::string ShardServer::disagreement() const {
  for (int w = 1; w < workers_; ++w)
    if (!(headers_[static_cast<std::size_t>(w)] == headers_[0]))
      return "worker 0 called " + headers_[0].describe() + " but worker " + std::to_string(w) + " called " +
             headers_[static_cast<std::size_t>(w)].describe();
  return "";
}

void ShardServer::serve(const PushHeader& h) {
  const Layout L(h, workers_, servers_);
  const std::size_t esz = L.element_size();
  const Range shard = L.shard(index_);
  const std::size_t C = L.chunks(index_), bytes = shard.size * esz;
  const auto workers = static_cast<std::size_t>(workers_);
  if (bytes > static_cast<std::size_t>(PTRDIFF_MAX) / workers)
    throw TransportError("server " + std::to_string(index_) + ", " + h.describe() + ": a shard of " +
                         std::to_string(bytes) + " bytes from each of " + std::to_string(workers_) +
                         " workers cannot be held");
  try {
    if (staging_.size() < bytes * workers) staging_.resize(bytes * workers);
  } catch (const std::bad_alloc&) {
    throw TransportError("server " + std::to_string(index_) + ", " + h.describe() + ": out of memory for " +
                         std::to_string(bytes * workers) + " bytes of staging (a shard from each worker)");
  }
  auto slot = [&](int w) { return staging_.data() + static_cast<std::size_t>(w) * bytes; };
  std::vector<RequestPtr> pushes, sends;
  for (std::size_t c = 0; c < C; ++c)
    for (int w = 0; w < workers_; ++w) {
      const Range piece = L.chunk(index_, c);
      pushes.push_back(t_.irecv(w, tag(Stream::push), slot(w) + (piece.begin - shard.begin) * esz, piece.size * esz));
    }
  for (int w = 0; w < workers_; ++w) {
    replies_[static_cast<std::size_t>(w)] = Reply{};
    sends.push_back(t_.isend(w, tag(Stream::reply), &replies_[static_cast<std::size_t>(w)], sizeof(Reply)));
  }
  const std::string what = h.describe();
  for (std::size_t c = 0; c < C; ++c) {
    const Range piece = L.chunk(index_, c);
    const std::vector<RequestPtr> arrived(pushes.begin() + static_cast<std::ptrdiff_t>(c * static_cast<std::size_t>(workers_)),
                                          pushes.begin() + static_cast<std::ptrdiff_t>((c + 1) * static_cast<std::size_t>(workers_)));
    wait(arrived, what);
    for (int w = 0; w < workers_; ++w)
      if (arrived[static_cast<std::size_t>(w)]->bytes() != piece.size * esz)
        throw TransportError("server " + std::to_string(index_) + ", " + what + ": worker " + std::to_string(w) +
                            " pushed " + std::to_string(arrived[static_cast<std::size_t>(w)]->bytes()) +
                            " bytes where " + std::to_string(piece.size * esz) + " were expected");
    // Worker order, whatever order the pushes arrived in: the same bits on every run.
    char* sum = slot(0) + (piece.begin - shard.begin) * esz;
    for (int w = 1; w < workers_; ++w)
      kernels::reduce(h.dtype, h.reduce, sum, sum, slot(w) + (piece.begin - shard.begin) * esz, piece.size);
    if (h.reduce == ReduceOp::avg) kernels::finish_avg(h.dtype, sum, piece.size, workers_);
    for (int w = 0; w < workers_; ++w) {
      const Range out = intersect(piece, L.pull(w));
      if (out.size == 0) continue;
      sends.push_back(t_.isend(w, tag(Stream::pull), slot(0) + (out.begin - shard.begin) * esz, out.size * esz));
      stats_.bytes_pulled += out.size * esz;
    }
  }
  wait(sends, what);
  stats_.bytes_pushed += bytes * static_cast<std::size_t>(workers_);
  ++stats_.operations;
}

void ShardServer::refuse(const std::string& why) {
  // Every worker still pushes by its own header: take those bytes, so the streams stay
  // in step, answer with the reason and empty pulls where each worker expects results.
  std::size_t largest = 0;
  for (const auto& h : headers_) largest = std::max<std::size_t>(largest, h.chunk_bytes + 16);
  std::vector<char> discard(largest);
  std::vector<RequestPtr> reqs;
  for (int w = 0; w < workers_; ++w) {
    const PushHeader& h = headers_[static_cast<std::size_t>(w)];
    const Layout L(h, workers_, servers_);
    for (std::size_t c = 0; c < L.chunks(index_); ++c)
      reqs.push_back(t_.irecv(w, tag(Stream::push), discard.data(), discard.size()));
    Reply& r = replies_[static_cast<std::size_t>(w)];
    r = Reply{};
    r.ok = 0;
    std::strncpy(r.message, why.c_str(), sizeof r.message - 1);
    reqs.push_back(t_.isend(w, tag(Stream::reply), &r, sizeof r));
    for (std::size_t c = 0; c < L.chunks(index_); ++c)
      if (intersect(L.chunk(index_, c), L.pull(w)).size) reqs.push_back(t_.isend(w, tag(Stream::pull), nullptr, 0));
  }
  wait(reqs, "refusing " + why);
}

}  // namespace strata::ps
