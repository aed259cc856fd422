// torch's reconfigure API (c10d Backend::reconfigure, torch 2.15) mapped onto strata: the
// handles a rank hands its peers, and how a new membership is reached from the current one.
//
// A handle is "strata:<instance>:<rank>": the communicator the rank is in and its rank
// there. The instance is "u<uuid>" for one a reconfigure made, "i<token>" for the one
// init_process_group made (rank 0's random token, shared at creation), and "p<token>", the
// process's own, while it has none (enable_reconfigure). Every member of an instance can
// name every other's handle without asking, which is what lets the survivors of a failure
// reconfigure with no store (shrink below).
//
// Two ways to the new membership, chosen from the handles alone, so every member of the
// new group chooses alike:
//  - shrink: the backend holds a communicator and the handles are some of its members,
//    in order, fewer than all. strata's shrink over the control mesh: no store, works with
//    the store's host gone, and under strata's quorum rule (core/quorum.hpp: more than half
//    of the communicator, ranks known dead not counted, an exact half only where the
//    arbiter names it), so two sides of a partition never both go on.
//  - create: anything else (first configuration, new members, merges, a new order, the
//    same members again, or quorum "caller"). A new communicator through the group's store
//    under "reconfigure/<uuid>/"; the new rank 0 claims the uuid there first, as gloo does,
//    so a uuid used before is refused on every member.
// The hint "strata.quorum" = "caller" says the caller's coordinator (torchft's lighthouse,
// say) already decided the membership, so a minority subset may go on (e.g. scaling down
// to single ranks); the default "majority" keeps strata's rule.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::torch_backend {

struct MemberHandle {
  std::string instance;
  int rank = 0;
};

std::string make_handle(const std::string& instance, int rank);
// Throws std::invalid_argument naming the handle when it is not one of strata's.
MemberHandle parse_handle(const std::string& handle);
std::string instance_of(std::int64_t uuid);

enum class QuorumRule { majority, caller };
// The "strata.*" hints; throws std::invalid_argument on an unknown one or value.
QuorumRule quorum_rule(const std::map<std::string, std::string>& hints);

struct ReconfigurePlan {
  int new_rank = 0;
  int new_size = 0;
  bool shrink = false;
  std::vector<int> excluded;  // shrink: the current ranks left out
};

// `mine`: this rank's handle now; `current_size`: its communicator's size, 0 with none.
// Throws std::invalid_argument on an empty list, a repeated handle, or one without ours.
ReconfigurePlan plan_reconfigure(const std::vector<std::string>& handles, const std::string& mine, int current_size,
                                 QuorumRule rule);

// A uuid every survivor derives alike for strata.torch.shrink (no coordinator to hand one
// out): from the instance and the ranks excluded; non-negative.
std::int64_t shrink_uuid(const std::string& instance, const std::vector<int>& excluded);

}  // namespace strata::torch_backend
