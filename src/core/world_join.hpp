// Joining a world at creation, shared by communicators and dedicated servers: publish
// this process's locality, read everyone's, connect the transport (with the WAN link for
// peers in other regions), and wait until every process is connected.
//
// Transport ranks: workers 0..N-1 (the communicator's ranks), then the S dedicated
// servers N..N+S-1. Workers publish "rank/<r>", servers "server/<j>", all "ready/<t>".
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/job_secret.hpp"
#include "bootstrap/store.hpp"
#include "strata/communicator.hpp"
#include "transport/factory.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

struct WorldShape {
  int me = 0;       // transport rank
  int workers = 1;  // N
  int servers = 0;  // S
  int size() const { return workers + servers; }
  bool is_server() const { return me >= workers; }
};

TransportKind resolve_transport(TransportKind k);       // automatic: STRATA_TRANSPORT
std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds t);  // 0: STRATA_TIMEOUT_S

// What a process says of its settings in its record (core/settings_check.hpp): what it
// refuses, and the settings every rank must share. Empty for a process that checks none.
struct PublishedSettings {
  std::string refused;
  std::string shared;
};

// What a process publishes in its rendezvous record beside its locality.
struct Published {
  PublishedSettings settings;
  std::string lineage;         // rank 0: the communicator's name for the arbiter (random, or from its parent)
  std::string liveness;        // this process's liveness port ("" for none)
};

// Every process's record, by transport rank.
struct Joined {
  std::vector<Locality> localities;
  std::vector<PublishedSettings> settings;
  std::vector<std::string> livenesses;
  std::string lineage;  // rank 0's
};

// The numbers after `kind` in "rendezvous timed out waiting for rank/2, rank/5, server/1":
// "2, 5" for "rank/".
std::string absent(const std::string& msg, const std::string& kind);

// Publishes this process's record and returns everyone's. A TimeoutError names the
// workers or servers that did not join.
Joined exchange_localities(bootstrap::Store& store, const WorldShape& w, transport::Clock::time_point deadline,
                           std::chrono::milliseconds timeout, const Published& mine = {});

// The transport to every process (routed over the WAN link for other regions when
// STRATA_WAN_LINK allows), after everyone has connected; every connection proves it
// knows `secret`.
std::unique_ptr<transport::Transport> connect_world(bootstrap::Store& store, TransportKind kind,
                                                    const WorldShape& w,
                                                    const std::vector<Locality>& localities,
                                                    transport::Clock::time_point deadline,
                                                    const bootstrap::JobSecret& secret,
                                                    const transport::FabricSettings& fabric);

// The job's secret when none was handed in: STRATA_JOB_SECRET(_FILE); else, with a
// store the caller brought (which the caller trusts), one rank 0 draws and shares there
// (`shared_store`); else the open key, and rank 0 warns that anyone can join.
bootstrap::JobSecret resolve_secret(bootstrap::Store& store, int rank, bool shared_store,
                                    transport::Clock::time_point deadline);

// STRATA_SERVERS, checked.
int configured_servers();

}  // namespace strata::detail
