// All-to-all personalized exchange: every member sends its own block to every other
// member directly. Each pair exchanges exactly one message each way (zero bytes where the
// split is empty, so a disagreement about sizes is always detected), which is optimal in
// bytes; the order of sends is staggered so that no member is everyone's first target.
#pragma once

#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"

namespace strata::collectives {

// a.splits gives the layout; a.send may overlap a.recv (it is staged first).
Steps alltoall(Context& ctx, const Group& g, const CollArgs& a);

}  // namespace strata::collectives
