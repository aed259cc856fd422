// Per-tag FIFO queues, the core of tag matching: posted receives waiting for a message,
// or messages waiting for a receive. Emptied tags are erased, because every collective
// uses fresh tags and finished ones must not pile up.
#pragma once

#include <deque>
#include <map>

#include "transport/transport.hpp"

namespace strata::transport {

template <class T>  // a pointer-like handle; take() returns a null one when nothing waits
class TagQueues {
 public:
  void push(Tag tag, T item) { queues_[tag].push_back(std::move(item)); }

  T take(Tag tag) {
    auto it = queues_.find(tag);
    if (it == queues_.end()) return T{};
    T item = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
    return item;
  }

  bool contains(Tag tag) const { return queues_.count(tag) != 0; }

  template <class F>
  void for_each(F&& f) {
    for (auto& [tag, q] : queues_)
      for (auto& item : q) f(item);
  }

  void clear() { queues_.clear(); }

 private:
  std::map<Tag, std::deque<T>> queues_;
};

}  // namespace strata::transport
