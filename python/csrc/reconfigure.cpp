#include "reconfigure.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

namespace strata::torch_backend {

namespace {

constexpr std::string_view kPrefix = "strata:";

}  // namespace

std::string make_handle(const std::string& instance, int rank) {
  return std::string(kPrefix) + instance + ":" + std::to_string(rank);
}

std::string instance_of(std::int64_t uuid) { return "u" + std::to_string(uuid); }

MemberHandle parse_handle(const std::string& handle) {
  const auto bad = [&] {
    return std::invalid_argument("\"" + handle.substr(0, 80) +
                                 "\" is not a strata reconfigure handle (strata:<instance>:<rank>, from "
                                 "dist._get_reconfigure_handle() on a strata group)");
  };
  if (handle.size() > 200 || handle.rfind(kPrefix, 0) != 0) throw bad();
  const auto colon = handle.rfind(':');
  if (colon <= kPrefix.size()) throw bad();
  MemberHandle h;
  h.instance = handle.substr(kPrefix.size(), colon - kPrefix.size());
  const char* first = handle.data() + colon + 1;
  const char* last = handle.data() + handle.size();
  const auto [end, ec] = std::from_chars(first, last, h.rank);
  if (ec != std::errc() || end != last || h.rank < 0 || h.instance.empty()) throw bad();
  return h;
}

QuorumRule quorum_rule(const std::map<std::string, std::string>& hints) {
  auto rule = QuorumRule::majority;
  for (const auto& [key, value] : hints) {
    if (key.rfind("strata.", 0) != 0) continue;  // another backend's
    if (key != "strata.quorum")
      throw std::invalid_argument("unknown hint \"" + key + "\" (strata takes strata.quorum)");
    if (value == "majority")
      rule = QuorumRule::majority;
    else if (value == "caller")
      rule = QuorumRule::caller;
    else
      throw std::invalid_argument("hint strata.quorum is \"" + value + "\"; it takes majority or caller");
  }
  return rule;
}

ReconfigurePlan plan_reconfigure(const std::vector<std::string>& handles, const std::string& mine, int current_size,
                                 QuorumRule rule) {
  if (handles.empty()) throw std::invalid_argument("no handles: a reconfigure needs at least this rank's");
  if (std::set<std::string>(handles.begin(), handles.end()).size() != handles.size())
    throw std::invalid_argument("a handle appears twice among the " + std::to_string(handles.size()) + " handles");
  std::vector<MemberHandle> parsed;
  for (const auto& h : handles) parsed.push_back(parse_handle(h));
  const auto at = std::find(handles.begin(), handles.end(), mine);
  if (at == handles.end())
    throw std::invalid_argument("this rank's handle " + mine + " is not among the " + std::to_string(handles.size()) +
                                " handles: only the members of the new group call reconfigure");
  ReconfigurePlan plan;
  plan.new_rank = static_cast<int>(at - handles.begin());
  plan.new_size = static_cast<int>(handles.size());

  const auto me = parse_handle(mine);
  bool subset = current_size > 0 && rule == QuorumRule::majority && plan.new_size < current_size;
  for (std::size_t i = 0; subset && i < parsed.size(); ++i)
    subset = parsed[i].instance == me.instance && parsed[i].rank < current_size &&
             (i == 0 || parsed[i].rank > parsed[i - 1].rank);
  if (subset) {
    plan.shrink = true;
    std::size_t next = 0;
    for (int r = 0; r < current_size; ++r) {
      if (next < parsed.size() && parsed[next].rank == r)
        ++next;
      else
        plan.excluded.push_back(r);
    }
  }
  return plan;
}

std::int64_t shrink_uuid(const std::string& instance, const std::vector<int>& excluded) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  const auto mix = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  };
  mix("shrink:" + instance);
  for (int r : excluded) mix("," + std::to_string(r));
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace strata::torch_backend
