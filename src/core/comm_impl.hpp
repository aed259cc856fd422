// The communicator: what it was built with and the rooms that do its jobs.
//   creation (rendezvous, mesh, transport, plan, selector) comm_bootstrap.cpp
//   issuing calls in order and handing them to the engine   comm_impl.cpp
//   settling and running one collective call                call_plan.hpp, call_router.hpp
//   the online tuner's agreement across ranks               tuning_protocol.hpp
//   failures: explained, told, fail fast after              failure_settlement.hpp
//   shrink                                                  shrink.cpp
//   grow, join and share_state                              membership.cpp
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
#include "core/any_source.hpp"
#include "core/call_router.hpp"
#include "core/device_call.hpp"
#include "core/engine.hpp"
#include "core/failure_settlement.hpp"
#include "core/fingerprint.hpp"
#include "core/settings_check.hpp"
#include "core/world_join.hpp"
#include "hierarchy/device_engines.hpp"
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
    // A shrunk or grown communicator's parent's link figures (rank 0's decide).
    std::optional<probe::Inherited> figures;
  };
  explicit CommImpl(const Setup& s);
  ~CommImpl();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int servers() const { return servers_; }
  const Locality& locality(int r) const;
  TransportKind transport_kind() const { return kind_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  transport::TrafficCounters traffic() const { return transport_->report().traffic(); }
  transport::PathFigures wan_path() const { return transport_->report().path(); }
  // Bytes device calls copied to and from the host.
  const device::CopyCounters& copy_counters() const { return copy_counters_; }

  // `where`: the placement the argument checks found (device_call.hpp); device buffers
  // are staged through host memory around the host plan.
  Work collective(const collectives::CollArgs& a, const CallOptions& o, const CallBuffers& where = {});
  Work point_to_point(bool is_send, void* buf, std::size_t count, DataType dt, int peer,
                      const CallOptions& o);
  // A receive from whichever rank's message comes first (any_source.hpp); *source is
  // set before the work completes.
  Work recv_any(void* buf, std::size_t count, DataType dt, int* source, const CallOptions& o);
  void abort(const std::string& why);
  // Ranks known lost (by this rank's control mesh or another's), ascending.
  std::vector<int> lost_ranks() const { return failures_.lost(); }
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
  // What this communicator measured, for those shrunk or grown from it.
  probe::Inherited figures_for_children() const;
  // The pipeline chunk of this communicator's collectives: STRATA_CHUNK_BYTES, else its transport's.
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  // The group of all ranks (and the dedicated servers), as flat collectives run over it.
  const collectives::Group& world() const { return world_; }
  // The hierarchical plan, if the communicator runs one.
  const std::optional<hierarchy::Plan>& plan() const { return plan_; }
  // What the online tuner learned so far (topology::Tuner::report), read between
  // collectives; empty when it is off.
  std::string tuning_report();
  // STRATA_CUDA_DRIVER, read at creation.
  const std::string& cuda_driver_path() const { return cuda_driver_path_; }

 private:
  void bootstrap(const Setup& s, transport::Clock::time_point deadline);
  // Runs call `seq` through the router; what fails is settled here.
  // `device`: a device call's engines (CallRouter::run).
  void run_collective(std::uint64_t seq, const collectives::CollArgs& a, std::chrono::milliseconds timeout,
                      const hierarchy::CallEngines* device = nullptr);
  // The NCCL communicators of device calls at `where` (null for emulated device memory,
  // whose levels inside a region run on the host engine); engine thread.
  hierarchy::NcclComms* nccl_comms(const device::Placement& where);
  // Whether a call on device buffers runs through NCCL (the hierarchical plan's device
  // route, or NCCL over the world of a flat communicator); the others are staged whole.
  bool through_nccl(const collectives::CollArgs& a) const;
  void check_usable() const { failures_.check_usable(); }
  // The copy streams of device calls at `where`, made on first use (under issue_mu_).
  device::CopyStreams& copy_streams(const device::Placement& where);
  // Blocks the engine thread until a device copy is done, progressing the transport;
  // fails like the call would (abort, deadline).
  void wait_for_copy(device::Marker& m, transport::Clock::time_point deadline, const std::string& what);
  void configure_spin();
  void plan_levels();  // topology file, then the hierarchical plan's groups if any
  // Probes the links (or reads the cache) and builds the selector; collective.
  // Raises the soft RLIMIT_NOFILE toward what this many peers may need; warns if the
  // hard limit is lower.
  void ensure_descriptors();
  void build_selector(bootstrap::Store& store, transport::Clock::time_point deadline,
                      const probe::Inherited* inherited);
  std::exception_ptr on_error(const std::exception_ptr& e);
  // The control mesh, connected to this rank's neighbours through `store`'s records.
  void connect_mesh(bootstrap::Store& store, transport::Clock::time_point deadline);
  int parse_full_upto(const std::string& v) const;  // rank 0's STRATA_MESH_FULL_UPTO
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
  FailureSettlement failures_{rank_};  // attached to the mesh and transport once both exist
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
  std::unique_ptr<CallRouter> router_;   // runs every collective call (engine thread)
  std::string cuda_driver_path_, nccl_library_path_;  // STRATA_CUDA_DRIVER, STRATA_NCCL_LIBRARY
  std::unique_ptr<hierarchy::NcclComms> nccl_;  // engine thread; made by the first device call on a plan
  device::CopyCounters copy_counters_;  // before the streams that count into it
  std::unique_ptr<device::CopyStreams> cuda_copies_, emulated_copies_;  // device calls', made on first use

  // Its name at the arbiter: random for a communicator made in a rendezvous, derived from
  // its parent's for one shrunk from it, so that both halves of a split claim one key.
  std::string lineage_;
  std::shared_ptr<Store> arbiter_;  // CommOptions::arbiter at creation
  int shrinks_ = 0;      // how many shrinks of this communicator were started, to key each apart
  std::mutex issue_mu_;  // orders sequence numbers with queue order
  std::uint64_t next_seq_ = 0;
  std::vector<std::uint64_t> send_seq_;
  std::shared_ptr<ReceiveOrder> receive_order_;  // receives' numbers, also the engine's


  std::shared_ptr<Engine> engine_;  // last: stopped first; Work handles hold weak refs
};

}  // namespace strata::detail
