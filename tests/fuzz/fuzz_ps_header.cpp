// A dedicated server's view of a worker's header (collectives/ps_protocol.hpp): any 32 bytes, for any
// number of workers and servers. A header the server accepts describes a layout whose
// shards, chunks and pulls all lie inside the vector, and whose chunks tile each shard.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "collectives/ps_protocol.hpp"

using namespace strata::ps;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < sizeof(PushHeader) + 2) return 0;
  PushHeader h;
  std::memcpy(&h, data, sizeof h);
  const int workers = 1 + data[sizeof h] % 64, servers = 1 + data[sizeof h + 1] % 16;
  if (!h.valid() || h.op == Op::close) return 0;
  const Layout L(h, workers, servers);
  std::size_t covered = 0;
  for (int j = 0; j < servers; ++j) {
    const Range shard = L.shard(j);
    if (shard.end() > h.count || shard.begin != covered) std::abort();
    covered = shard.end();
    const std::size_t C = L.chunks(j);
    if ((C == 0) != (shard.size == 0)) std::abort();
    // The first and last few chunks: enough to see the tiling without walking millions.
    std::size_t expect = shard.begin;
    for (std::size_t c = 0; c < C && c < 4; ++c) {
      const Range r = L.chunk(j, c);
      if (r.begin != expect || r.size * L.element_size() > h.chunk_bytes + L.element_size()) std::abort();
      expect = r.end();
    }
    if (C > 0 && L.chunk(j, C - 1).end() != shard.end()) std::abort();
  }
  if (covered != h.count) std::abort();
  for (int w = 0; w < workers; ++w)
    if (L.pull(w).end() > h.count) std::abort();
  return 0;
}
