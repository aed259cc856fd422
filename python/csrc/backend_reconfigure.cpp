// StrataBackend's side of torch's reconfigure API; reconfigure.hpp says how a membership
// maps onto strata's shrink or a new communicator.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend.hpp"
#include "torch_store.hpp"

namespace strata::torch_backend {

namespace {

constexpr std::string_view kHint =
    "; a coordinator that decides the membership itself passes hints={'strata.quorum': 'caller'}";

// Bad handles or hints are Python ValueErrors; a failed shrink or rendezvous is torch's
// DistBackendError. Both carry strata's message.
template <class F>
void reporting(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, "strata reconfigure: ", e.what());
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, "strata reconfigure: ", e.what());
  } catch (const QuorumLostError& e) {
    std::rethrow_exception(backend_error(std::string("strata reconfigure: ") + e.what() + std::string(kHint)));
  } catch (const Error& e) {
    std::rethrow_exception(backend_error(std::string("strata reconfigure: ") + e.what()));
  }
}

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

void StrataBackend::reconfigure_to(std::int64_t uuid, const std::vector<std::string>& handles,
                                   std::optional<std::chrono::milliseconds> timeout_in, QuorumRule rule,
                                   const c10::intrusive_ptr<c10d::Store>& arbiter) {
  reporting([&] {
#ifndef C10D_BACKEND_HAS_RECONFIGURE
    // c10d's Backend fixes its rank and size before torch 2.15; strata.torch.shrink takes
    // its own path there.
    throw std::invalid_argument("this torch's c10d cannot change a backend's rank and size (torch 2.15 can)");
#endif
    if (used_uuids_.count(uuid))
      throw std::invalid_argument("uuid " + std::to_string(uuid) +
                                  " was already used on this rank; each reconfigure needs a fresh uuid");
    const auto mine = handle();
    const auto plan = plan_reconfigure(handles, mine, comm_ ? size_ : 0, rule);
    const auto timeout = timeout_in.value_or(timeout_);
    CommOptions o;
    o.timeout = timeout;
    std::optional<Communicator> next;
    if (plan.shrink) {
      if (arbiter) o.arbiter = std::make_shared<TorchStore>(arbiter);
      next.emplace(comm_->shrink(plan.excluded, o));
    } else {
      if (!store_)
        throw std::invalid_argument("this group came from a shrink without a store, so it can only shrink again (" +
                                    std::to_string(handles.size()) + " handles name other members)");
      auto store = c10::make_intrusive<c10d::PrefixStore>("reconfigure/" + std::to_string(uuid), store_);
      // The uuid names one membership: its first rank claims it, every member reads whose
      // claim stands, so a reused uuid fails everywhere rather than mixing two groups' keys.
      if (plan.new_rank == 0) {
        const auto held = store->compareSet("claimed", bytes(""), bytes(mine));
        if (held != bytes(mine))
          throw std::invalid_argument("uuid " + std::to_string(uuid) + " was already used (claimed by " +
                                      std::string(held.begin(), held.end()) +
                                      "); each reconfigure needs a fresh uuid");
      }
      auto rendezvous = std::make_shared<TorchStore>(store);
      const auto claimed = rendezvous->get({"claimed"}, Store::Clock::now() + timeout)[0];
      if (claimed != handles[0])
        throw std::invalid_argument("uuid " + std::to_string(uuid) + " was already used (claimed by " + claimed +
                                    "); each reconfigure needs a fresh uuid");
      next.emplace(rendezvous, plan.new_rank, plan.new_size, o);
    }
    // The old communicator's works end first (a lost peer fails them at once), then it
    // goes: ranks left out see this rank leave.
    completions_.drain();
    comm_ = std::move(next);
#ifdef C10D_BACKEND_HAS_RECONFIGURE
    rank_ = plan.new_rank;
    size_ = plan.new_size;
#endif
    instance_ = instance_of(uuid);
    collectives_ = 0;
    used_uuids_.insert(uuid);
  });
}

void StrataBackend::shrink_in_place(const std::vector<int>& lost, std::chrono::milliseconds timeout,
                                    const c10::intrusive_ptr<c10d::Store>& arbiter) {
  std::vector<int> excluded = lost;
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  std::vector<std::string> handles;
  for (int r = 0; r < size_; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) handles.push_back(make_handle(instance_, r));
  for (int r : excluded)
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "strata shrink: lost rank ", r, " is out of range for ", size_, " ranks");
  TORCH_CHECK_VALUE(!std::binary_search(excluded.begin(), excluded.end(), rank_),
                    "strata shrink: this rank is among the ranks to exclude");
  TORCH_CHECK_VALUE(!excluded.empty(), "strata shrink: no ranks to exclude");
  reconfigure_to(shrink_uuid(instance_, excluded), handles, timeout, QuorumRule::majority, arbiter);
}

#ifdef C10D_BACKEND_HAS_RECONFIGURE
c10::intrusive_ptr<c10d::Work> StrataBackend::reconfigure(const c10d::ReconfigureOptions& opts) {
  std::vector<std::string> handles;
  std::visit([&](const auto& given) { handles.assign(given.begin(), given.end()); }, opts.handles);
  if (std::holds_alternative<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles)) {
    // A set: strata picks the order, the current one where there is one.
    std::vector<std::pair<std::pair<std::string, int>, std::string>> keyed;
    reporting([&] {
      for (const auto& h : handles) {
        const auto m = parse_handle(h);
        keyed.push_back({{m.instance, m.rank}, h});
      }
    });
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size(); ++i) handles[i] = keyed[i].second;
  }
  QuorumRule rule = QuorumRule::majority;
  reporting([&] { rule = quorum_rule(std::map<std::string, std::string>(opts.hints.begin(), opts.hints.end())); });
  // An exact half goes on where the group's store, outside the halves, names it.
  reconfigure_to(opts.uuid, handles, opts.timeout, rule, store_);
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  done->markCompleted(c10::IValue(std::vector<at::Tensor>()));
  return c10d::Work::create_from_future(done);
}
#endif

}  // namespace strata::torch_backend
