// The WAN link's exchange between forked ranks, shared by the link's tests
// (test_wan_link.cpp) and its TLS tests (test_wan_tls.cpp): random bytes between every
// pair of ranks, checked byte for byte.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "fork_ranks.hpp"
#include "transport/transport.hpp"
#include "wan/wan_options.hpp"

namespace strata::test {

using Bytes = std::vector<unsigned char>;
inline constexpr auto kChildTimeout = std::chrono::milliseconds(60000);
inline constexpr auto kWaitBudget = std::chrono::seconds(45);

// Deterministic per (src, dst, size, salt), so the receiver knows what to expect.
Bytes random_bytes(int src, int dst, std::size_t size, std::uint64_t salt);
// Every rank of n sets its key and waits for all of them.
void barrier(bootstrap::Store& store, int rank, int n, const std::string& name);
// Every rank sends `rounds` messages of each size to every other rank and checks what
// it receives byte for byte. Returns the sender-side reconnect count.
std::uint64_t exchange(transport::Transport& t, bootstrap::Store& store, int n,
                       const std::vector<std::size_t>& sizes, int rounds);
// n ranks, each with a WAN link of `opt` over a FileStore, running body.
std::vector<RankResult> run_ranks(int n, const wan::WanOptions& opt,
                                  const std::function<void(transport::Transport&, bootstrap::Store&)>& body);

}  // namespace strata::test
