// The α-β-γ cost model (DESIGN §6): what a collective should cost over a group whose
// links have latency α (s per message), inverse bandwidth β (s per byte) and local
// reduction cost γ (s per byte reduced). Flat algorithms are priced by formula, the
// hierarchical plans as sums of per-level stages. The selector ranks algorithms with it,
// strata-plan prints it; neither ever runs anything to find out.
//
// Sizes follow nccl-tests' size column: the whole vector for allreduce, broadcast and
// reduce, the whole input (reduce_scatter) or output (allgather) over all ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/dispatch.hpp"
#include "collectives/registry.hpp"
#include "strata/types.hpp"
#include "topology/levels.hpp"

namespace strata::topology {

// The kinds of link a group can span (DESIGN §2): ranks on one host, hosts of one region,
// and regions joined by the WAN (whose figures may differ per pair of regions).
enum class LinkClass : std::uint8_t { shm, net, wan };
inline constexpr int kLinkClasses = 3;
const char* to_string(LinkClass c);  // "shm", "net", "wan"

struct LinkCost {
  double alpha = 0;  // seconds per message, one way
  double beta = 0;   // seconds per byte
  // Seconds each further message costs when a rank posts several at once (LogGP's gap):
  // α is paid once per round, but a round of p-1 concurrent messages (direct, a tree's
  // fan-out) still queues them through one rank's stack.
  double gap = 0;
  // Probability that a packet is lost one way (WAN links: a topology file's, or what the
  // link's streams retransmitted while probing); 0 elsewhere.
  double loss = 0;
  bool operator==(const LinkCost&) const = default;
};

// A lossy link priced as a loss-free one for messages of `message_bytes`: a message meets
// a lost packet with probability 1 - (1 - loss)^packets, and its stream then stalls about
// 1.25 round trips (2.5 α) until the retransmission fills the hole; what is sent again
// adds to β. Loss-free links come back as they were.
LinkCost priced_with_loss(LinkCost c, double message_bytes);

// Where a figure came from, so strata-plan can say how far to trust it.
enum class Source : std::uint8_t { builtin, probed, cached, file };
const char* to_string(Source s);

struct LinkFigure {
  LinkCost cost;
  Source source = Source::builtin;
};

// Every figure a prediction needs, identical on all ranks of a communicator (probe.cpp
// agrees on them) so every rank ranks algorithms the same way.
struct Figures {
  LinkFigure link[kLinkClasses];
  double gamma = 0;  // seconds per byte of reduction output
  Source gamma_source = Source::builtin;
  std::size_t chunk_bytes = 1 << 20;  // pipeline chunk of the ring, tree and chain
  std::size_t small_bytes = collectives::kDefaultSmallBytes;  // split-rail plans' latency path (STRATA_SMALL_BYTES)
  // Seconds every round pays on top of its link's α for how the rank waits, not for the
  // link: half a turn of wan::RoutedTransport's alternating sleep once ranks span regions.
  double wait_alpha = 0;
  // The WAN matrix: regions in order of their lowest rank, and one figure per ordered
  // pair (row = from). Empty: link[wan] between every pair.
  std::vector<std::string> regions;
  std::vector<LinkFigure> wan;

  const LinkFigure& of(LinkClass c) const { return link[static_cast<int>(c)]; }
  LinkFigure& of(LinkClass c) { return link[static_cast<int>(c)]; }
  // The pair's figure, or link[wan] when the matrix does not name both regions.
  LinkCost wan_pair(const std::string& from, const std::string& to) const;
  // The slowest pair among these regions, in both α and β: a ring or tree across them
  // advances at the pace of its slowest hop.
  LinkCost wan_worst(const std::vector<std::string>& among) const;
};

// The built-in table (cost_model.cpp), with the default chunk and small sizes: the
// communicator puts its own settings in (CommImpl::build_selector), as tools do theirs.
Figures default_figures();

// One prediction, split by term so the selector can say what bounds it.
struct Cost {
  double alpha = 0;  // latency: rounds on the critical path times α, plus queued messages times the gap
  double beta = 0;   // bytes on the busiest link times β
  double gamma = 0;  // bytes reduced on the critical path times γ
  double total() const { return alpha + beta + gamma; }
  friend Cost operator+(Cost a, const Cost& b) { return Cost{a.alpha + b.alpha, a.beta + b.beta, a.gamma + b.gamma}; }
  // "α-bound", "β-bound", "γ-bound" or "mixed" (no term above half).
  const char* bound() const;
};

// What one group's links cost and how its algorithms cut messages.
struct GroupCost {
  LinkCost link;
  double gamma = 0;
  double chunk_bytes = 1 << 20;
  // A group spanning regions with several members in one region shares that region's WAN
  // egress among them: a ring or chain in group order crosses it on ring_sharing links at
  // once (1 when regions are contiguous), the other algorithms from up to wan_sharing
  // members (the most members any region has). Their β terms are multiplied accordingly.
  double ring_sharing = 1;
  double wan_sharing = 1;
  // A ring or chain in group order crosses only the pairs of regions next to each other
  // in it: its slowest hop, where that is not `link` (the slowest pair of all).
  std::optional<LinkCost> ring_link;
  // Dedicated parameter servers serving the group, reached over the same links.
  int servers = 0;
  // Members map the host's shared segment (Group::shared_memory): shared_memory runs.
  bool shared_memory = false;
};

// Predicted cost of flat algorithm `a` running `kind` over p ranks; nullopt when `a` does
// not implement `kind` (registry supports() says whether it runs for given arguments).
std::optional<Cost> predict(collectives::AlgorithmId a, CollectiveKind kind, int p, double bytes,
                            const GroupCost& g);

// The fastest flat algorithm for a case by the model alone, with its cost.
struct Best {
  collectives::AlgorithmId algorithm = collectives::AlgorithmId::ring;
  Cost cost;
};
Best best_flat(CollectiveKind kind, int p, double bytes, const GroupCost& g);

// One level of a hierarchical plan as the model sees it: its group size and links.
struct LevelCost {
  Level level = Level::host;
  int size = 1;
  GroupCost cost;
};

// A plan's levels below the top, down and back up, and the bytes its top level's
// collective moves. Split rail: a ring reduce-scatter and allgather per level, leaving
// the top a 1/(ranks per region) shard. Leader: the whole vector reduced (or gathered)
// to each unit's leader and broadcast back.
struct Descent {
  Cost cost;
  double top_bytes = 0;
};
Descent split_rail_descent(const std::vector<LevelCost>& levels, double bytes);
Descent leader_descent(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes);

// Split rail (uniform layouts): reduce-scatter down the levels below the top, the top
// level's collective on the remaining shard, allgather back up; each stage at its own
// level's figures. Levels innermost first, the last one crossing regions. Broadcast
// scatters, crosses and allgathers; allreduce at or below small_bytes runs a whole
// allreduce per level instead (as split_rail.cpp does).
Cost predict_split_rail(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes,
                        std::size_t small_bytes);
// Leader plan (any layout): the whole vector climbs by reduce (or gather) to each unit's
// leader, the top level's leaders run the collective, and it comes back down by
// broadcast; `levels` gives the largest group at each level.
Cost predict_leader(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes);

// A lossy allreduce over p ranks (quant/compressed_allreduce.hpp) exchanging encodings
// the way `how` says: its rounds, the encodings on the busiest link, and the codec's
// passes over the vector priced at γ.
Cost predict_compressed(collectives::EncodedExchange how, int p, const collectives::EncodedShape& s,
                        const GroupCost& g);
// The cheaper of the two, by the model (gather on a tie: one round fewer).
collectives::EncodedExchange best_exchange(int p, const collectives::EncodedShape& s, const GroupCost& g);

// The link class that a group of these localities spans: shm when all share a host, net
// when all share a region, else wan.
LinkClass classify(const std::vector<Locality>& members);
LinkClass level_class(Level l);

}  // namespace strata::topology
