// Creating a communicator: the rendezvous (secret, localities, settings agreed), the
// control mesh, the transport, the hierarchical plan, the probed figures and the selector,
// and the router that runs calls with them.
#include <algorithm>

#include <boost/system/system_error.hpp>

#include "core/config.hpp"
#include "base/listener.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "bootstrap/liveness_port.hpp"
#include "core/comm_impl.hpp"
#include "core/launch_env.hpp"
#include "core/link_settings.hpp"
#include "core/mesh_gather.hpp"
#include "core/world_join.hpp"
#include "hierarchy/plan_cost.hpp"
#include "strata/errors.hpp"
#include "topology/topology_file.hpp"
#include "transport/address_exchange.hpp"

namespace strata::detail {

using transport::Clock;

namespace {

// Where creation spends its time, at STRATA_LOG_LEVEL=trace: "records 12.0 ms, ...".
class Stopwatch {
 public:
  void lap(const char* what) {
    if (!log::enabled(log::Level::trace)) return;
    const auto now = Clock::now();
    laps_ += (laps_.empty() ? "" : ", ") + std::string(what) + " " +
             std::to_string(std::chrono::duration<double, std::milli>(now - last_).count()) + " ms";
    last_ = now;
  }
  const std::string& text() const { return laps_; }

 private:
  Clock::time_point last_ = Clock::now();
  std::string laps_;
};

}  // namespace

void CommImpl::bootstrap(const Setup& s, Clock::time_point deadline) {
  Stopwatch watch;
  servers_ = settings_.servers;
  if (settings_.refused.empty()) ensure_descriptors();
  try {
    std::shared_ptr<Store> inner = s.store;
    if (s.secret) {
      secret_ = *s.secret;
    } else if (auto configured = detail::configured_secret()) {
      secret_ = *configured;
    }
    if (!inner) {
      const auto [host, port] = bootstrap::split_host_port(s.root, "rendezvous address");
      const auto& sockets = settings_.fabric.sockets;
      if (s.serve_root && rank_ == 0)
        server_ = std::make_unique<bootstrap::StoreServer>(host, port, secret_,
                                                           bootstrap::StoreServerLimits::with(sockets));
      inner = std::make_shared<bootstrap::TcpStore>(host, port, deadline, secret_, sockets);
    }
    bootstrap::PrefixStore store(inner, s.key_prefix);
    if (!s.secret) secret_ = resolve_secret(store, rank_, s.store != nullptr, deadline);
    const WorldShape shape{rank_, size_, servers_};
    const auto& sockets = settings_.fabric.sockets;
    // The mesh comes first: creation's exchanges then run along its links rather than
    // through rank 0's store (core/mesh_gather.hpp). Its shape is rank 0's, so that
    // ranks that disagree on STRATA_MESH_FULL_UPTO still connect and hear the verdict.
    if (rank_ == 0) store.set("mesh-full-upto", std::to_string(settings_.mesh_full_upto));
    const int full_upto = parse_full_upto(store.get("mesh-full-upto", deadline));
    mesh_ = std::make_unique<bootstrap::ControlMesh>(
        rank_, size_, transport::listen_host(store, sockets.ifaddr),
        bootstrap::MeshTiming{settings_.heartbeat, sockets.keepalive, sockets.handshake, sockets.bind_any, sockets.ports,
                              full_upto},
        secret_);
    watch.lap("secret and mesh listener");
    failures_.attach(mesh_.get(), nullptr);
    connect_mesh(store, deadline);
    watch.lap("control mesh");
    MeshGather gathering(store, *mesh_, rank_, size_);
    Published mine{{settings_.refused_text(), settings_.shared_text()},
                   "",
                   net::advertised(bootstrap::liveness_address(mesh_->host(), sockets), sockets.advertise)};
    if (rank_ == 0) mine.lineage = s.lineage.empty() ? bootstrap::JobSecret::random().hex().substr(0, 32) : s.lineage;
    auto joined = exchange_localities(gathering, shape, deadline, timeout_, mine);
    watch.lap("records");
    refuse_disagreement(store, joined.settings, deadline);
    lineage_ = joined.lineage;
    auto& all = joined.localities;
    // Behind NAT, peers in other regions reach a liveness port at the advertised address.
    std::vector<std::string> livenesses(joined.livenesses.begin(), joined.livenesses.begin() + size_);
    for (int r = 0; r < size_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      livenesses[i] = net::reachable(livenesses[i], all[i].region == all[static_cast<std::size_t>(rank_)].region);
    }
    mesh_->set_livenesses(std::move(livenesses));
    localities_.assign(all.begin(), all.begin() + size_);
    plan_levels();  // may move workers by the topology file's placements
    std::copy(localities_.begin(), localities_.end(), all.begin());
    watch.lap("plan");
    transport_ = connect_world(gathering, kind_, shape, all, deadline, secret_, settings_.fabric);
    watch.lap("transport");
    if (!config::given(config::chunk_bytes)) chunk_bytes_ = transport_->report().profile().chunk_bytes;
    failures_.attach(mesh_.get(), transport_.get());
    build_selector(store, deadline, s.figures ? &*s.figures : nullptr);
    watch.lap("figures and selector");
    router_ = std::make_unique<CallRouter>(CallRouter::Parts{
        transport_.get(), size_, &scratch_, chunk_bytes_,
        PlanInputs{selector_.get(), tuner_.get(), plan_ ? &*plan_ : nullptr, &world_}, &feedback_});
    // The store rank 0 serves ends with it, so rank 0 leaves creation (and may then leave
    // the job) only once every other rank is done with the store: a rank still reading
    // the probe's figures once lost it to rank 0 meeting a mismatch and exiting first.
    if (rank_ != 0) {
      store.set("done/" + std::to_string(rank_), "");
    } else if (server_) {
      std::vector<std::string> done;
      for (int r = 1; r < size_; ++r) done.push_back("done/" + std::to_string(r));
      if (!done.empty()) store.get(done, deadline);
    }
    watch.lap("done");
    if (log::enabled(log::Level::trace)) log::trace("creation of rank " + std::to_string(rank_) + " of " +
                                                    std::to_string(size_) + ": " + watch.text());
  } catch (const TimeoutError& e) {
    // Ranks that "did not join" may have been turned away by this rank's own store.
    if (server_ && !server_->trouble().empty()) throw TimeoutError(std::string(e.what()) + "; " + server_->trouble());
    throw;
  } catch (const boost::system::system_error& e) {
    // A socket or event descriptor the OS refused (Asio throws these from constructors).
    throw TransportError("communicator creation on rank " + std::to_string(rank_) + ": " + e.what() +
                         sys::limit_note(e.code()));
  }
}

void CommImpl::refuse_disagreement(bootstrap::Store& store, const std::vector<PublishedSettings>& published,
                                   Clock::time_point deadline) {
  std::vector<std::string> refused, shared;
  for (int r = 0; r < size_; ++r) {
    refused.push_back(published[static_cast<std::size_t>(r)].refused);
    shared.push_back(published[static_cast<std::size_t>(r)].shared);
  }
  const std::string why = settings_verdict(refused, shared, rank_);
  if (why.empty()) return;
  // Every rank reads the same records and fails alike; the rank serving the store keeps
  // it up until the others have read them (or a few seconds), so they fail with this
  // reason rather than with a store that went away.
  store.set("settings-read/" + std::to_string(rank_), "");
  if (server_) {
    std::vector<std::string> read;
    for (int r = 0; r < size_; ++r) read.push_back("settings-read/" + std::to_string(r));
    try {
      store.get(read, std::min(deadline, Clock::now() + std::chrono::seconds(10)));
    } catch (const TimeoutError&) {
    }
  }
  throw InvalidArgument("communicator creation on rank " + std::to_string(rank_) + ": " + why);
}

int CommImpl::parse_full_upto(const std::string& v) const {
  try {
    std::size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == v.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw TransportError("communicator creation on rank " + std::to_string(rank_) +
                       ": rank 0 published a malformed mesh shape '" + v.substr(0, 32) + "'");
}

void CommImpl::connect_mesh(bootstrap::Store& store, Clock::time_point deadline) {
  // Each rank publishes where its mesh and liveness port listen, and its region (peers in
  // another region reach them at the advertised address, behind NAT); each reads only
  // its neighbours'.
  const auto& sockets = settings_.fabric.sockets;
  const std::string region = local_locality().region;
  store.set("mesh/" + std::to_string(rank_),
            region + '\n' + net::advertised(mesh_->address(), sockets.advertise) + '\n' +
                net::advertised(bootstrap::liveness_address(mesh_->host(), sockets), sockets.advertise));
  const auto& near = mesh_->neighbours();
  std::vector<std::string> keys;
  for (int r : near) keys.push_back("mesh/" + std::to_string(r));
  std::vector<std::string> values;
  try {
    values = store.get(keys, deadline);
  } catch (const TimeoutError& e) {
    throw TimeoutError("communicator creation on rank " + std::to_string(rank_) + ": rank(s) " +
                       absent(e.what(), "mesh/") + " of " + std::to_string(size_) + " did not join within " +
                       std::to_string(timeout_.count() / 1000.0) + " s (STRATA_TIMEOUT_S)");
  }
  std::vector<std::string> addresses(static_cast<std::size_t>(size_)), livenesses(addresses.size());
  for (std::size_t k = 0; k < near.size(); ++k) {
    const auto first = values[k].find('\n'), second = values[k].find('\n', first + 1);
    if (first == std::string::npos || second == std::string::npos)
      throw TransportError("communicator creation on rank " + std::to_string(rank_) + ": rank " +
                           std::to_string(near[k]) + " published a malformed mesh record");
    const bool same_region = values[k].compare(0, first, region) == 0;
    const auto i = static_cast<std::size_t>(near[k]);
    addresses[i] = net::reachable(values[k].substr(first + 1, second - first - 1), same_region);
    livenesses[i] = net::reachable(values[k].substr(second + 1), same_region);
  }
  bootstrap::ControlMesh::Events events;
  events.lost = [this](int r, const std::string& why) { failures_.on_peer_lost(r, why); };
  events.notice = [this](const bootstrap::ControlNotice& n) { failures_.on_notice(n); };
  mesh_->connect(addresses, deadline, std::move(events), livenesses);
  // A rank's mesh is up once it is connected to each of its neighbours, but a neighbour
  // may not yet be through its side of their link: a rank that left creation and closed
  // the communicator at once was then taken for dead by a peer still connecting. Every
  // rank tells its neighbours that its mesh is up and waits to hear the same from them
  // (ranks it holds no connection with cannot take it for dead).
  std::vector<std::string> up;
  for (int r : near) up.push_back("mesh-up/" + std::to_string(r));
  mesh_->put("mesh-up/" + std::to_string(rank_), "", near);
  mesh_->wait(up, deadline, near);
}

void CommImpl::ensure_descriptors() {
  // Every peer may cost a socket each way on the intra-region fabric, K striped streams
  // each way across regions, and one control connection; rank 0 holds one store
  // connection per process.
  const std::uint64_t procs = static_cast<std::uint64_t>(size_ + servers_);
  const std::uint64_t streams =
      config::get(config::wan_link) == 0 ? 0 : static_cast<std::uint64_t>(std::max<std::int64_t>(config::get(config::wan_streams), 4));
  const std::uint64_t want = 64 + procs * (3 + 2 * streams) + (rank_ == 0 ? procs : 0);
  const std::uint64_t have = sys::raise_open_file_limit(want);
  if (have != 0 && have < want)
    log::warn("this process may have at most " + std::to_string(have) + " open files (RLIMIT_NOFILE, hard limit) but " +
              std::to_string(procs) + " processes may need up to about " + std::to_string(want) +
              " here; if connections fail with 'Too many open files', raise it with 'ulimit -n'");
}

namespace {

// Every rank asks only about its own peers; shares_memory gives the same answer on every
// rank of a host, so all members of a group come to the same verdict.
bool all_share_memory(const transport::Transport& t, const collectives::Group& g) {
  for (int i = 0; i < g.size(); ++i)
    if (i != g.me && !t.shares_memory(g.rank(i))) return false;
  return true;
}

}  // namespace

probe::Inherited CommImpl::figures_for_children() const {
  return probe::Inherited{probe_report_.measured, selector_ ? selector_->figures().regions : std::vector<std::string>{}};
}

void CommImpl::build_selector(bootstrap::Store& store, Clock::time_point deadline, const probe::Inherited* inherited) {
  configure_spin();  // probes wait for round trips the way collectives wait for messages
  probe::ProbeInputs in;
  in.rank = rank_;
  in.size = size_;
  in.localities = &localities_;
  in.transport = transport_.get();
  in.store = &store;
  in.deadline = deadline;
  in.file = topo_file_ ? &*topo_file_ : nullptr;
  in.enabled = settings_.probe;
  in.cache_max_age_s = settings_.probe_cache_s;
  in.budget_s = settings_.probe_budget_s;
  // Only what was measured carries over (not figures a skipped probe left built in).
  if (inherited && !inherited->measured.pairs.empty()) in.inherited = inherited;
  // What else changes the figures of the same ranks: the fabric and the WAN link's shape.
  in.cache_key = std::string("transport=") + transport_->name() + " wan_link=" + config::text(config::wan_link) +
                 " wan_streams=" + config::text(config::wan_streams) + " wan_emulate=" + config::get(config::wan_emulate);
  auto figures = probe::agree_figures(in, &probe_report_);
  // Every rank of a communicator spanning regions waits the same way, so all add the same.
  figures.wait_alpha = std::chrono::duration<double>(transport_->report().profile().wait_latency).count();
  figures.chunk_bytes = chunk_bytes_;  // the model cuts vectors as the algorithms will
  figures.small_bytes = settings_.small_bytes;
  selector_ = std::make_unique<topology::Selector>(
      std::move(figures), localities_, topology::parse_algorithm_rules(config::get(config::algo), "STRATA_ALGO", true));
  if (const auto how = config::get(config::compressed_exchange); how != "auto")
    selector_->force_exchange(how == "gather" ? collectives::EncodedExchange::gather
                                              : collectives::EncodedExchange::reduce_scatter);
  world_ = collectives::Group::world(rank_, size_);
  for (int j = 0; j < servers_; ++j) world_.servers.push_back(size_ + j);
  world_.shared_memory = all_share_memory(*transport_, world_);
  selector_->add_group(world_);
  if (size_ > 1 && config::get(config::tune) != 0) {
    topology::Tuner::Options t;
    t.samples = static_cast<int>(config::get(config::tune_samples));
    tuner_ = std::make_unique<topology::Tuner>(*selector_, t);
  }
  if (plan_) {
    hierarchy::order_regions(*plan_, localities_, selector_->figures());
    if (rank_ == 0 && plan_->region_ring->order.size() > 2)
      log::info("regions in ring order: " + topology::describe(*plan_->region_ring, selector_->figures()));
    for (auto& g : plan_->mine) {
      g.shared_memory = all_share_memory(*transport_, g);
      selector_->add_group(g);
    }
    plan_->pricing = hierarchy::price_levels(*selector_, *plan_);
  }
  if (rank_ == 0 && log::enabled(log::Level::info)) {
    const auto& f = selector_->figures();
    std::string s = "link figures (" +
                    std::string(probe_report_.how == probe::ProbeReport::How::probed   ? "probed"
                                : probe_report_.how == probe::ProbeReport::How::cached ? "cached"
                                : probe_report_.how == probe::ProbeReport::How::inherited ? "inherited"
                                                                                           : "not probed: ") +
                    (probe_report_.how == probe::ProbeReport::How::skipped ? probe_report_.why : "") + ", " +
                    std::to_string(probe_report_.seconds * 1e3) + " ms):";
    for (int c = 0; c < topology::kLinkClasses; ++c) {
      const auto& l = f.link[c];
      s += std::string(" ") + topology::to_string(static_cast<topology::LinkClass>(c)) + " alpha " +
           std::to_string(l.cost.alpha * 1e6) + " us beta " + std::to_string(l.cost.beta * 1e9) + " ns/B gap " +
           std::to_string(l.cost.gap * 1e6) + " us (" + topology::to_string(l.source) + ");";
    }
    s += " gamma " + std::to_string(f.gamma * 1e9) + " ns/B";
    log::info(s);
  }
}

void CommImpl::plan_levels() {
  topo_file_ = topology_file(settings_, size_);
  if (topo_file_) localities_ = topology::apply_placements(*topo_file_, std::move(localities_));
  plan_ = hierarchy::make_plan(localities_, rank_, hierarchy::parse_choice(config::get(config::algo)));
  if (plan_) plan_->segment_bytes = settings_.segment_bytes;
  if (plan_ && rank_ == 0) log::info(plan_->describe());
}

}  // namespace strata::detail
