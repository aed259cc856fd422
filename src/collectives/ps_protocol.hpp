// What workers and dedicated parameter servers say to each other. It sits with the
// worker side (param_server.cpp) so that the servers (src/ps/) include it from below.
//
// Per collective, every worker sends every server one PushHeader and then its chunks of
// that server's shard; the server answers every worker with one Reply and then the chunks
// of the shard that worker pulls. Each (worker, server) pair uses one tag per stream and
// the transport matches same-tag messages in the order they were sent, so consecutive
// collectives need no sequence numbers of their own. A worker closing its communicator
// sends a header with op close; a server stops when every worker has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/types.hpp"
#include "transport/tags.hpp"

namespace strata::ps {

enum class Op : std::uint8_t { allreduce = 1, reduce_scatter = 2, close = 3 };

struct PushHeader {
  static constexpr std::uint32_t kMagic = 0x53505453;  // "STPS"
  static constexpr std::uint64_t kMaxChunkBytes = std::uint64_t{1} << 30;
  std::uint32_t magic = kMagic;
  Op op = Op::close;
  DataType dtype = DataType::u8;
  ReduceOp reduce = ReduceOp::sum;
  std::uint8_t reserved = 0;
  std::uint64_t seq = 0;          // the workers' collective number, for messages
  std::uint64_t count = 0;        // elements of the vector every worker pushes
  std::uint64_t chunk_bytes = 0;  // how shards are cut into messages

  // Every field in range and every size it implies addressable: a server trusts nothing
  // else from a worker's header.
  bool valid() const;
  bool operator==(const PushHeader&) const = default;
  std::string describe() const;  // "allreduce #12 (f32 x 1000, sum)"
};

// ok = 0 carries the server's reason, and the pulled chunks that follow are empty.
struct Reply {
  std::uint32_t ok = 1;
  char message[252] = {};
};

enum class Stream : std::uint8_t { header = 1, push = 2, reply = 3, pull = 4 };
inline transport::Tag tag(Stream s) { return transport::server_tag(static_cast<std::uint8_t>(s)); }

struct Range {
  std::size_t begin = 0, size = 0;
  std::size_t end() const { return begin + size; }
};
Range intersect(Range a, Range b);

// Where every element travels: the vector is cut into one shard per server and each
// shard into chunks of at most chunk_bytes; worker w pulls pull(w) of the result.
// Workers and servers compute it from the same header, so they agree chunk by chunk.
class Layout {
 public:
  Layout(const PushHeader& h, int workers, int servers);
  Range shard(int server) const;
  std::size_t chunks(int server) const;  // 0 for an empty shard
  Range chunk(int server, std::size_t c) const;
  Range pull(int worker) const;
  std::size_t element_size() const { return esz_; }

 private:
  PushHeader h_;
  int workers_, servers_;
  std::size_t esz_;
};

}  // namespace strata::ps
