// Communicator::shrink: the members left agree over the control mesh on whom they
// exclude, prove they are a quorum (core/quorum.hpp), and build the smaller communicator
// through a store made of the mesh itself.
#include <algorithm>
#include <numeric>

#include "core/config.hpp"
#include "core/comm_impl.hpp"
#include "core/mesh_store.hpp"
#include "core/quorum.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

using transport::Clock;

namespace {

// A shrink whose quorum is in doubt asks the excluded ranks' hosts for their control
// ports this long (a connection refused: the process is gone).
constexpr auto kDeathProbe = std::chrono::milliseconds(1500);
// Separates a shrink proposal's excluded ranks from the ones its rank found gone.
constexpr std::string_view kDeadMark = " dead ";

}  // namespace

std::unique_ptr<CommImpl> CommImpl::shrink(std::span<const int> excluded_in, const CommOptions& opts) {
  const std::string who = "shrink on rank " + std::to_string(rank_);
  std::vector<int> excluded(excluded_in.begin(), excluded_in.end());
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  for (int r : excluded)
    if (r < 0 || r >= size_)
      throw InvalidArgument(who + ": lost rank " + std::to_string(r) + " is out of range for " + std::to_string(size_) + " ranks");
  if (std::binary_search(excluded.begin(), excluded.end(), rank_))
    throw InvalidArgument(who + ": this rank is among the ranks to exclude");
  if (servers_ > 0) throw InvalidArgument(who + ": a communicator with dedicated parameter servers cannot shrink");
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) members.push_back(r);
  const std::string prefix = "shrink/" + std::to_string(++shrinks_) + "/";
  const auto deadline = Clock::now() + (opts.timeout.count() > 0 ? opts.timeout : timeout_);

  // Every member proposes whom it excludes; a member that disagrees would build another
  // world, so all of them fail instead. Proposals go to every rank still connected, so
  // that a member left out by another's list hears the disagreement too. Where the
  // members are no majority, each also says which excluded ranks it found gone for good
  // (core/quorum.hpp); those every member found do not count.
  const std::string mine = rank_list(excluded);
  const bool in_doubt = 2 * members.size() <= static_cast<std::size_t>(size_);
  const auto dead_here = in_doubt ? mesh_->confirm_dead(excluded, kDeathProbe) : std::vector<int>{};
  std::vector<int> everyone(static_cast<std::size_t>(size_));
  std::iota(everyone.begin(), everyone.end(), 0);
  mesh_->put(prefix + "excluded/" + std::to_string(rank_), mine + std::string(kDeadMark) + rank_list(dead_here), everyone);
  std::vector<std::string> keys;
  for (int r : members) keys.push_back(prefix + "excluded/" + std::to_string(r));
  const auto theirs = mesh_->wait(keys, deadline, members);
  std::vector<int> dead = dead_here;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto mark = theirs[i].find(kDeadMark);
    const std::string list = theirs[i].substr(0, mark);
    if (list != mine)
      throw MismatchError(who + ": rank " + std::to_string(members[i]) + " excludes ranks " + list +
                          " but this rank excludes " + mine + "; every survivor must pass the same lost ranks");
    const auto found = parse_rank_list(mark == std::string::npos ? "{}" : theirs[i].substr(mark + kDeadMark.size()));
    std::erase_if(dead, [&](int d) { return std::find(found.begin(), found.end(), d) == found.end(); });
  }
  auto arbiter = opts.arbiter ? opts.arbiter : arbiter_;
  if (!arbiter && in_doubt && !config::get(config::arbiter).empty())
    arbiter = connect_store(config::get(config::arbiter), std::chrono::seconds(5));
  require_quorum({who, size_, members, dead, rank_, arbiter.get(), "strata-arbiter/" + lineage_, deadline});

  Setup s;
  s.rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  s.size = static_cast<int>(members.size());
  s.store = std::make_shared<MeshStore>(*mesh_, members);
  s.key_prefix = prefix;
  s.secret = secret_;
  s.lineage = lineage_ + "/" + rank_list(members);
  s.figures = figures_for_children();  // the survivors' links are the ones measured
  s.options = opts;
  s.options.arbiter = arbiter;
  if (s.options.transport == TransportKind::automatic) s.options.transport = kind_;
  if (s.options.timeout.count() == 0) s.options.timeout = timeout_;
  return std::make_unique<CommImpl>(s);
}

}  // namespace strata::detail
