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
Steps ring_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                    std::size_t count, DataType dt, ReduceOp op);
// send holds g.size() blocks of recvcount; rank i of the group keeps block i.
Steps ring_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                         std::size_t recvcount, DataType dt, ReduceOp op);
// recv holds g.size() blocks of sendcount; block i comes from rank i of the group.
Steps ring_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                    std::size_t sendcount, DataType dt);
// Building blocks for hierarchical plans, over n elements split into g.size() uneven
// pieces (piece_begin/piece_size). After the reduce-scatter, piece g.me of recv is the
// group's reduction (op avg reduces as sum here); the other pieces hold partial sums.
// The allgather fills every other piece of buf from its owner.
Steps ring_reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t n, DataType dt, ReduceOp op);
Steps ring_allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt);
// Both, over buf in place on channel `ch`: a pipeline keeps several in flight between the
// same peers, each on a channel of its own (transport::stage_channel). With avg_divisor
// > 0 each member divides the piece it owns before sharing it (op must then be sum).
Steps ring_allreduce_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt,
                            ReduceOp op, Channel ch, int avg_divisor = 0);

// Reduce-scatter to every rank, then each rank sends its block to the root.
Steps ring_reduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                 DataType dt, ReduceOp op, int root);
// Pipelined chain from the root: chunk c moves on as soon as it arrives.
Steps chain_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, int root);

// Latency-optimal variants for small messages (log p steps).
Steps recursive_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                  std::size_t count, DataType dt, ReduceOp op);
Steps binomial_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                        std::size_t count, DataType dt, int root);
Steps binomial_reduce(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, ReduceOp op, int root);
// Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive halving, then
// allgather by recursive doubling; non-powers of two fold the first 2(p - p2) ranks in
// pairs first. Bandwidth like the ring in 2 log2 p rounds.
Steps halving_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t count, DataType dt, ReduceOp op);
Steps halving_doubling_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                     std::size_t recvcount, DataType dt, ReduceOp op);
Steps halving_doubling_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t sendcount, DataType dt);

// Pipelined double binary tree: each half of the vector reduced up and broadcast down its
// own tree, chunk by chunk; the trees' interiors are disjoint. The broadcast feeds the two
// halves into two trees over the other ranks.
Steps double_tree_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, ReduceOp op);
Steps double_tree_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, int root);

// Direct exchange (colocated parameter server): each rank reduces its own block from all
// others' at once, then sends it to all. Two rounds, p - 1 concurrent flows.
Steps direct_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t count, DataType dt, ReduceOp op);
Steps direct_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t recvcount, DataType dt, ReduceOp op);
Steps direct_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t sendcount, DataType dt);

// One-round allreduce: every rank sends its vector to all others and reduces the p vectors
// in group order, so all end with the same bits; in chunks of ctx.chunk_bytes().
Steps exchange_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                        std::size_t count, DataType dt, ReduceOp op);
// One-round barrier: a message to every other rank, carrying the call's stamp.
Steps exchange_barrier(Context& ctx, const Group& g);

// Among the processes of one host (g.shared_memory), through the segment they all map:
// each rank copies its piece into its slot, reduces its block from the peers' slots and
// copies the finished blocks out; a round of empty notices per step.
Steps shared_memory_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                             std::size_t count, DataType dt, ReduceOp op);
Steps shared_memory_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                  std::size_t recvcount, DataType dt, ReduceOp op);
Steps shared_memory_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                             std::size_t sendcount, DataType dt);

// Dissemination barrier: ceil(log2 p) rounds of empty messages.
Steps dissemination_barrier(Context& ctx, const Group& g, Channel ch = Channel::data);

// Dedicated parameter servers (g.servers): every worker pushes the vector, split by
// server shard; each server sums its shard over the workers and sends back what each
// worker pulls (allreduce: everything; reduce_scatter: its block). `count` is the
// per-rank count as in the public API.
Steps param_server_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                            std::size_t count, DataType dt, ReduceOp op);
Steps param_server_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                 std::size_t recvcount, DataType dt, ReduceOp op);

}  // namespace strata::collectives
