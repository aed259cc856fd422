"""torch.distributed.all_reduce throughput through one backend (bench/wan/torch_wan.sh).

Rank, world and rendezvous come from the environment (env://). Rank 0 prints one line
per size: size, median time and bus bandwidth (2(P-1)/P x size / time, nccl-tests')."""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--backend", required=True)
p.add_argument("--sizes", default="1M,4M,16M,64M,256M")
p.add_argument("--iters", type=int, default=3)
a = p.parse_args()
if a.backend == "strata":
    import strata.torch  # noqa: F401
dist.init_process_group(a.backend)
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)
for s in a.sizes.split(","):
    nbytes = int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]]
    t = torch.ones(nbytes // 4)
    dist.all_reduce(t)  # warm-up
    times = []
    for _ in range(a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
    ok = bool((t == world ** (a.iters + 1)).all())
    med = torch.tensor(statistics.median(times), dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)  # the slowest rank's median
    if rank == 0:
        busbw = 2 * (world - 1) / world * nbytes / med.item() / 1e6
        print(f"{a.backend:7s} {s:>5s} {med.item() * 1e3:10.1f} ms {busbw:8.2f} MB/s {'ok' if ok else 'WRONG'}",
              flush=True)
dist.destroy_process_group()
