#include "wan_exchange.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "bootstrap/file_store.hpp"
#include "temp_dir.hpp"
#include "wan/wan_transport.hpp"

namespace strata::test {

using transport::Clock;
using transport::RequestPtr;
using namespace std::chrono_literals;

Bytes random_bytes(int src, int dst, std::size_t size, std::uint64_t salt) {
  std::mt19937_64 gen((std::uint64_t(src) << 56) ^ (std::uint64_t(dst) << 48) ^ size ^ (salt << 20));
  Bytes out(size);
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t v = gen();
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, size - i));
  }
  return out;
}

void barrier(bootstrap::Store& store, int rank, int n, const std::string& name) {
  store.set("barrier/" + name + "/" + std::to_string(rank), "");
  std::vector<std::string> keys;
  for (int p = 0; p < n; ++p) keys.push_back("barrier/" + name + "/" + std::to_string(p));
  store.get(keys, Clock::now() + kWaitBudget);
}

std::uint64_t exchange(transport::Transport& t, bootstrap::Store& store, int n,
                       const std::vector<std::size_t>& sizes, int rounds) {
  const int me = t.rank();
  for (int round = 0; round < rounds; ++round)
    for (std::size_t size : sizes) {
      const std::uint64_t salt = std::uint64_t(round) * 1000 + size % 997;
      std::vector<Bytes> in(n), out(n);
      std::vector<RequestPtr> reqs, recvs(n);
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        in[p].assign(size + 8, 0xEE);
        recvs[p] = t.irecv(p, 7, in[p].data(), in[p].size());
        reqs.push_back(recvs[p]);
      }
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        out[p] = random_bytes(me, p, size, salt);
        reqs.push_back(t.isend(p, 7, out[p].data(), size));
      }
      const std::string what = "round " + std::to_string(round) + ", size " + std::to_string(size);
      require(transport::wait_all(t, reqs, Clock::now() + kWaitBudget), what + ": timed out");
      // Sends are done once the link owns their bytes; see them delivered before going on.
      require(transport::settle(t, Clock::now() + kWaitBudget), what + ": sends not acknowledged in time");
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const Bytes want = random_bytes(p, me, size, salt);
        require(recvs[p]->bytes() == size, what + ": wrong size from " + std::to_string(p));
        require(std::equal(want.begin(), want.end(), in[p].begin()),
                what + ": payload from rank " + std::to_string(p) + " differs");
        require(in[p][size] == 0xEE, what + ": wrote past the message");
      }
    }
  const auto reconnects = dynamic_cast<wan::WanTransport&>(t).reconnects();
  barrier(store, me, n, "done");  // nobody leaves while a peer still needs its acks
  return reconnects;
}

std::vector<RankResult> run_ranks(int n, const wan::WanOptions& opt,
                                        const std::function<void(transport::Transport&,
                                                                 bootstrap::Store&)>& body) {
  TempDir dir;
  return fork_ranks(n, kChildTimeout, [&](int rank) {
    bootstrap::FileStore store(dir.path());
    auto t = wan::make_wan_transport(rank, n, store, Clock::now() + 10s, opt);
    body(*t, store);
  });
}

}  // namespace strata::test
