#include "core/quorum.hpp"

#include "strata/errors.hpp"

namespace strata::detail {

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "{";
  for (int r : ranks) s += (s.size() > 1 ? ", " : "") + std::to_string(r);
  return s + "}";
}

std::vector<int> parse_rank_list(const std::string& text) {
  std::vector<int> out;
  int value = -1;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = (value < 0 ? 0 : value * 10) + (c - '0');
      if (value > 1 << 24) return out;  // no communicator is that large: not a list of ours
    } else if (value >= 0) {
      out.push_back(value);
      value = -1;
    }
  }
  if (value >= 0) out.push_back(value);
  return out;
}

void require_quorum(const QuorumCase& q) {
  const int counted = q.size - static_cast<int>(q.dead.size());
  const int n = static_cast<int>(q.members.size());
  if (2 * n > counted) return;
  const std::string rejoin =
      "; this rank can rejoin the ranks that went on (Communicator::join in their next grow) once it reaches them again";
  const std::string part = std::to_string(n) + " of the " + std::to_string(counted) + " ranks " +
                           (q.dead.empty() ? "" : "not known dead ") + "take part " + rank_list(q.members);
  if (2 * n < counted)
    throw QuorumLostError(q.who + ": " + part + ", not more than half: the excluded ranks may be going on without "
                                   "them on the other side of a partition" + rejoin);
  if (!q.arbiter)
    throw QuorumLostError(q.who + ": " + part + ", exactly half, and no arbiter (CommOptions::arbiter, STRATA_ARBITER) "
                                   "to say which half goes on: neither does" + rejoin);
  const std::string mine = rank_list(q.members);
  std::string winner;
  try {
    if (q.me == q.members.front() && q.arbiter->add(q.claim_key + "/claims", 1) == 1)
      q.arbiter->set(q.claim_key + "/winner", mine);
    winner = q.arbiter->get(q.claim_key + "/winner", q.deadline);
  } catch (const Error& e) {
    throw QuorumLostError(q.who + ": " + part + ", exactly half, and the arbiter did not say which half goes on (" +
                          e.what() + ")" + rejoin);
  }
  if (winner != mine)
    throw QuorumLostError(q.who + ": " + part + ", exactly half, and the arbiter gave the communicator to the other "
                                   "half, ranks " + winner + rejoin);
}

}  // namespace strata::detail
