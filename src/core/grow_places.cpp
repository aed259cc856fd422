#include "core/grow_places.hpp"

#include <thread>
#include <vector>

#include "base/log.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

namespace {

using namespace std::chrono_literals;

constexpr auto kBeat = 500ms;     // a waiting joiner's sign of life
constexpr auto kSilence = 3s;     // without one for this long, its place is free again
constexpr auto kPoll = 200ms;

std::string seconds_text(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0).substr(0, 4) + " s";
}

}  // namespace

GrowPlaces::GrowPlaces(Store& store, int old_size, int new_size)
    : store_(store), old_size_(old_size), new_size_(new_size) {}

std::string GrowPlaces::key(int place, const char* what, std::int64_t epoch) const {
  return "place/" + std::to_string(place) + "/" + what + (epoch < 0 ? "" : "/" + std::to_string(epoch));
}

std::int64_t GrowPlaces::epoch(int place) { return store_.add(key(place, "epoch", -1), 0); }

bool GrowPlaces::try_claim(int place, Claim& out) {
  const std::int64_t e = epoch(place);
  if (store_.add(key(place, "claims", e), 1) != 1) return false;
  out = {place, e};
  return true;
}

int GrowPlaces::join(int wanted, Clock::time_point deadline) {
  if (wanted >= 0 && (wanted < old_size_ || wanted >= new_size_))
    throw InvalidArgument("join: rank " + std::to_string(wanted) + " is not one of the new places " +
                          std::to_string(old_size_) + " .. " + std::to_string(new_size_ - 1));
  for (;;) {
    Claim mine{-1, -1};
    while (mine.place < 0) {
      for (int p = wanted >= 0 ? wanted : old_size_; p < (wanted >= 0 ? wanted + 1 : new_size_) && mine.place < 0; ++p)
        try_claim(p, mine);
      if (mine.place >= 0) break;
      if (Clock::now() >= deadline)
        throw TimeoutError("join: " + (wanted >= 0 ? "place " + std::to_string(wanted) + " was"
                                                   : "every place of " + std::to_string(old_size_) + " .. " +
                                                         std::to_string(new_size_ - 1) + " was") +
                           " taken by a live joiner until the deadline (" + std::to_string(old_size_) +
                           " ranks grow to " + std::to_string(new_size_) + ")");
      std::this_thread::sleep_for(kPoll);  // a place may be freed by a joiner that died
    }
    // Beat until "go"; it names the epoch each place was settled in.
    std::string go;
    while (go.empty() && epoch(mine.place) == mine.epoch) {
      store_.add(key(mine.place, "beat", mine.epoch), 1);
      try {
        go = store_.get("go", std::min(deadline, Clock::now() + kBeat));
      } catch (const TimeoutError&) {
        if (Clock::now() >= deadline) throw;
      }
    }
    if (go.empty()) continue;  // taken for dead meanwhile (it was too slow to beat): claim again
    std::vector<std::int64_t> epochs;
    for (std::size_t at = 0; at < go.size();) {
      const std::size_t comma = go.find(',', at);
      epochs.push_back(std::stoll(go.substr(at, comma - at)));
      at = comma == std::string::npos ? go.size() : comma + 1;
    }
    const auto i = static_cast<std::size_t>(mine.place - old_size_);
    if (i < epochs.size() && epochs[i] == mine.epoch) return mine.place;
    throw TimeoutError("join: the places were settled without this joiner: it was silent for more than " +
                       seconds_text(kSilence) + " and place " + std::to_string(mine.place) + " went to another");
  }
}

void GrowPlaces::decide(Clock::time_point deadline) {
  const int places = new_size_ - old_size_;
  struct Seen {
    std::int64_t epoch = -1, beat = -1;
    Clock::time_point changed;
    std::int64_t confirm = -1;  // the beat a confirming beat must come after
  };
  std::vector<Seen> seen(static_cast<std::size_t>(places));
  bool confirming = false;
  for (;;) {
    const auto now = Clock::now();
    std::string epochs, waiting;
    bool confirmed = true;
    for (int i = 0; i < places; ++i) {
      const int p = old_size_ + i;
      auto& s = seen[static_cast<std::size_t>(i)];
      const std::int64_t e = epoch(p);
      bool claimed = store_.add(key(p, "claims", e), 0) > 0;
      const std::int64_t beat = store_.add(key(p, "beat", e), 0);
      if (e != s.epoch) {
        s = {e, beat, now, -1};
      } else if (beat != s.beat) {
        s.beat = beat;
        s.changed = now;
      }
      if (claimed && now - s.changed > kSilence) {
        log::warn("grow: the joiner of place " + std::to_string(p) + " has shown no sign of life for " +
                  seconds_text(now - s.changed) + ": it is taken for dead, and its place is free for another");
        store_.add(key(p, "epoch", -1), 1);
        claimed = false;
      }
      if (!claimed) waiting += (waiting.empty() ? "" : ", ") + std::to_string(p);
      if (confirming && (s.confirm < 0 || beat <= s.confirm)) confirmed = false;
      epochs += (i ? "," : "") + std::to_string(e);
    }
    // Every place claimed: each joiner must still beat once more before "go", so that one
    // that died a moment ago is not given a place it cannot take.
    if (!waiting.empty()) {
      confirming = false;
    } else if (!confirming) {
      confirming = true;
      for (auto& s : seen) s.confirm = s.beat;
    } else if (confirmed) {
      return store_.set("go", epochs);
    }
    if (now >= deadline)
      throw TimeoutError("grow: place(s) " + waiting + " of " + std::to_string(old_size_) + " .. " +
                         std::to_string(new_size_ - 1) + " had no live joiner before the deadline");
    std::this_thread::sleep_for(kPoll);
  }
}

void GrowPlaces::await(Clock::time_point deadline) { store_.get("go", deadline); }

}  // namespace strata::detail
