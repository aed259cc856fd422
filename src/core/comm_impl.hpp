// The communicator's state: bootstrap, transport, engine, sequence numbers, and the
// first fatal error (after which every call fails fast instead of hanging).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/control_mesh.hpp"
#include "bootstrap/tcp_store.hpp"
#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"
#include "core/engine.hpp"
#include "core/fingerprint.hpp"
#include "core/peer_health.hpp"
#include "core/settings_check.hpp"
#include "core/world_join.hpp"
#include "hierarchy/plan.hpp"
#include "quant/error_feedback.hpp"
#include "strata/communicator.hpp"
#include "strata/errors.hpp"
#include "probe/probe.hpp"
#include "topology/selector.hpp"
#include "topology/tuner.hpp"
#include "topology/topology_file.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

// A reading of this process's monotonic clock in seconds: the online tuner's stamps, which
// rank 0 compares across ranks (one clock on one host).
inline double clock_seconds(transport::Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

class CommImpl {
 public:
  struct Setup {
    int rank = 0;
    int size = 1;
    std::shared_ptr<Store> store;  // the caller's store; else one at root
    std::string root;        // host:port of the store
    std::string key_prefix;  // separates communicators sharing one store
    bool serve_root = false; // rank 0 starts the store server itself
    std::optional<bootstrap::JobSecret> secret;  // a UniqueId's, a shrunk parent's; else resolved
    std::string lineage;     // a shrunk communicator's name for the arbiter; "": rank 0 draws one
    CommOptions options;
  };
  explicit CommImpl(const Setup& s);
  ~CommImpl();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int servers() const { return servers_; }
  const Locality& locality(int r) const;
  TransportKind transport_kind() const { return kind_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  transport::TrafficCounters traffic() const { return transport_->traffic(); }

  Work collective(const collectives::CollArgs& a, const CallOptions& o);
  Work point_to_point(bool is_send, void* buf, std::size_t count, DataType dt, int peer,
                      const CallOptions& o);
  void abort(const std::string& why);
  // Ranks known lost (by this rank's control mesh or another's), ascending.
  std::vector<int> lost_ranks() const { return health_.lost(); }
  // The communicator of every rank but `excluded`, met over this one's control mesh;
  // see Communicator::shrink.
  std::unique_ptr<CommImpl> shrink(std::span<const int> excluded, const CommOptions& opts);

  // The compression an allreduce with these options runs with (none when exact).
  Compression compression_for(const CallOptions& o) const;
  // Runs f on the error-feedback store between collectives (it is the engine's).
  void with_feedback(const std::function<void(quant::ErrorFeedback&)>& f);

  // The algorithm selector every rank built from the same probed figures, and how this
  // rank came by them (tests, strata-plan).
  const topology::Selector& selector() const { return *selector_; }
  const probe::ProbeReport& probe_report() const { return probe_report_; }
  // The pipeline chunk of this communicator's collectives: STRATA_CHUNK_BYTES, else its transport's.
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  // The group of all ranks (and the dedicated servers), as flat collectives run over it.
  const collectives::Group& world() const { return world_; }
  // The hierarchical plan, if the communicator runs one.
  const std::optional<hierarchy::Plan>& plan() const { return plan_; }
  // What the online tuner learned so far (topology::Tuner::report), read between
  // collectives; empty when it is off.
  std::string tuning_report();

 private:
  void bootstrap(const Setup& s, transport::Clock::time_point deadline);
  // tunable: the call named no algorithm, so the online tuner may pick it.
  void run_collective(const Fingerprint& fp, const collectives::CollArgs& a,
                      std::chrono::milliseconds timeout, bool tunable = false);
  void check_usable() const;
  // Every rank but the root tells the root it passed its check of the call; the root waits.
  void confirm_to_root(collectives::Context& ctx, int root);
  void configure_spin();
  void plan_levels();  // topology file, then the hierarchical plan's groups if any
  // Probes the links (or reads the cache) and builds the selector; collective.
  // Raises the soft RLIMIT_NOFILE toward what this many peers may need; warns if the
  // hard limit is lower.
  void ensure_descriptors();
  void build_selector(bootstrap::Store& store, transport::Clock::time_point deadline);
  std::exception_ptr on_error(const std::exception_ptr& e);
  // The control mesh's news, on its thread.
  void on_peer_lost(int rank, const std::string& why);
  void on_notice(const bootstrap::ControlNotice& n);
  // The error an operation fails with, once: explained by what the mesh knows, recorded
  // as the communicator's failure, passed on to every rank if it is news from here, and
  // the transport stopped. `what` names the operation ("" when the symptom does).
  std::exception_ptr settle(const std::string& what, std::uint64_t seq, const std::exception_ptr& symptom,
                            const std::string& hint = "");
  void fail_all(const std::string& why);  // marks the communicator failed, stops the transport
  // Each candidate's time (topology::Tuner::judge) from every rank's timings of the
  // size's exploration (Tuner::offer), judged on rank 0, which answers everyone: all
  // ranks return the same bits.
  std::vector<double> agree_on_times(std::uint64_t seq, CollectiveKind kind, std::uint64_t bytes,
                                     const std::vector<double>& mine, transport::Clock::time_point deadline);
  // A notice from this rank to every other over the control mesh.
  void tell_everyone(ErrorCode code, std::uint64_t seq, const std::string& text, std::vector<int> lost = {});
  void connect_mesh(const std::vector<std::string>& addresses, transport::Clock::time_point deadline);
  // Fails creation, on every rank alike, when a rank refused its settings or the ranks'
  // shared settings differ (core/settings_check.hpp).
  void refuse_disagreement(bootstrap::Store& store, const std::vector<PublishedSettings>& published,
                           transport::Clock::time_point deadline);
  void close_servers();  // tells the dedicated servers this worker is done

  int rank_;
  int size_;
  SettingsCheck settings_;  // read once, before anything else: what the rest starts from
  int servers_ = 0;  // dedicated parameter servers, transport ranks size_ .. size_+servers_-1
  TransportKind kind_;
  std::chrono::milliseconds timeout_;
  std::size_t chunk_bytes_;
  std::unique_ptr<bootstrap::StoreServer> server_;
  bootstrap::JobSecret secret_;  // every connection of this communicator proves it knows it
  std::vector<Locality> localities_;
  std::unique_ptr<transport::Transport> transport_;
  PeerHealth health_{rank_};
  std::unique_ptr<bootstrap::ControlMesh> mesh_;  // before the transport is destroyed, stopped
  collectives::Scratch scratch_;
  std::optional<hierarchy::Plan> plan_;  // none: flat algorithms only
  std::optional<topology::TopologyFile> topo_file_;  // STRATA_TOPO_FILE
  std::unique_ptr<topology::Selector> selector_;
  std::unique_ptr<topology::Tuner> tuner_;  // engine thread only; none: STRATA_TUNE=0 or one rank
  probe::ProbeReport probe_report_;
  collectives::Group world_;
  Compression default_compression_;      // STRATA_COMPRESS
  quant::ErrorFeedback feedback_;        // engine thread only

  // Its name at the arbiter: random for a communicator made in a rendezvous, derived from
  // its parent's for one shrunk from it, so that both halves of a split claim one key.
  std::string lineage_;
  std::shared_ptr<Store> arbiter_;  // CommOptions::arbiter at creation
  std::vector<std::string> livenesses_;  // every rank's process liveness port (bootstrap/liveness_port.hpp)
  int shrinks_ = 0;      // how many shrinks of this communicator were started, to key each apart
  std::mutex issue_mu_;  // orders sequence numbers with queue order
  std::uint64_t next_seq_ = 0;
  std::vector<std::uint64_t> send_seq_, recv_seq_;

  mutable std::mutex fail_mu_;
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::exception_ptr settled_;  // engine thread: the last error settle() returned

  std::shared_ptr<Engine> engine_;  // last: stopped first; Work handles hold weak refs
};

}  // namespace strata::detail
