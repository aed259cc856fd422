// The flat algorithms, each over one Group. Counts are in elements of dt. All ranks of
// the group call the same function with the same arguments (the fingerprint check
// enforces it); `send` may equal `recv` where an operation allows in-place use.
#pragma once

#include <cstddef>
#include <cstring>

#include "collectives/context.hpp"
#include "strata/types.hpp"

namespace strata::collectives {

// In-place calls pass the same buffer twice; everyone else gets a copy.
inline void copy_if_distinct(void* dst, const void* src, std::size_t bytes) {
  if (dst != src && bytes) std::memcpy(dst, src, bytes);
}

// Ring: reduce-scatter then allgather, pipelined in chunks of ctx.chunk_bytes().
void ring_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                    std::size_t count, DataType dt, ReduceOp op);
// send holds g.size() blocks of recvcount; rank i of the group keeps block i.
void ring_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                         std::size_t recvcount, DataType dt, ReduceOp op);
// recv holds g.size() blocks of sendcount; block i comes from rank i of the group.
void ring_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                    std::size_t sendcount, DataType dt);
// Building blocks for hierarchical plans, over n elements split into g.size() uneven
// pieces (piece_begin/piece_size). After the reduce-scatter, piece g.me of recv is the
// group's reduction (op avg reduces as sum here); the other pieces hold partial sums.
// The allgather fills every other piece of buf from its owner.
void ring_reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t n, DataType dt, ReduceOp op);
void ring_allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt);

// Reduce-scatter to every rank, then each rank sends its block to the root.
void ring_reduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                 DataType dt, ReduceOp op, int root);
// Pipelined chain from the root: chunk c moves on as soon as it arrives.
void chain_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, int root);

// Latency-optimal variants for small messages (log p steps).
void recursive_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                  std::size_t count, DataType dt, ReduceOp op);
void binomial_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                        std::size_t count, DataType dt, int root);
void binomial_reduce(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, ReduceOp op, int root);
// Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive halving, then
// allgather by recursive doubling; non-powers of two fold the first 2(p - p2) ranks in
// pairs first. Bandwidth like the ring in 2 log2 p rounds.
void halving_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t count, DataType dt, ReduceOp op);
void halving_doubling_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                     std::size_t recvcount, DataType dt, ReduceOp op);
void halving_doubling_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t sendcount, DataType dt);

// Pipelined double binary tree: each half of the vector reduced up and broadcast down its
// own tree, chunk by chunk; the trees' interiors are disjoint. The broadcast feeds the two
// halves into two trees over the other ranks.
void double_tree_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, ReduceOp op);
void double_tree_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, int root);

// Direct exchange (colocated parameter server): each rank reduces its own block from all
// others' at once, then sends it to all. Two rounds, p - 1 concurrent flows.
void direct_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t count, DataType dt, ReduceOp op);
void direct_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t recvcount, DataType dt, ReduceOp op);
void direct_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t sendcount, DataType dt);

// One-round allreduce: every rank sends its vector to all others and reduces the p vectors
// in group order, so all end with the same bits; in chunks of ctx.chunk_bytes().
void exchange_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                        std::size_t count, DataType dt, ReduceOp op);
// One-round barrier: a message to every other rank, carrying the call's stamp.
void exchange_barrier(Context& ctx, const Group& g);

// Among the processes of one host (g.shared_memory), through the segment they all map:
// each rank copies its piece into its slot, reduces its block from the peers' slots and
// copies the finished blocks out; a round of empty notices per step.
void shared_memory_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                             std::size_t count, DataType dt, ReduceOp op);
void shared_memory_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                  std::size_t recvcount, DataType dt, ReduceOp op);
void shared_memory_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                             std::size_t sendcount, DataType dt);

// Dissemination barrier: ceil(log2 p) rounds of empty messages.
void dissemination_barrier(Context& ctx, const Group& g, Channel ch = Channel::data);

// Dedicated parameter servers (g.servers): every worker pushes the vector, split by
// server shard; each server sums its shard over the workers and sends back what each
// worker pulls (allreduce: everything; reduce_scatter: its block). `count` is the
// per-rank count as in the public API.
void param_server_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                            std::size_t count, DataType dt, ReduceOp op);
void param_server_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                 std::size_t recvcount, DataType dt, ReduceOp op);

}  // namespace strata::collectives
