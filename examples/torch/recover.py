"""Training that goes on when a rank is lost, two ways, as torchft does:

    python examples/torch/recover.py --ranks 4 --steps 60 --kill-at 15

This script is its own launcher: it serves a torch TCPStore that no rank hosts and starts
--ranks processes in two emulated regions, which train a small regression with
data-parallel SGD over the "strata" backend. At step --kill-at one rank kills itself
(SIGKILL), in the middle of the gradient allreduce of the others.

1. Shrink: the survivors' allreduce raises; strata.torch.lost_ranks() names the rank, and
   strata.torch.shrink() replaces the default group with the survivors' (met over the old
   group's control connections: no store, so rank 0 could have been the one lost). They
   agree on the step to resume from and go on with one rank fewer.
2. Grow: the launcher starts a replacement, which asks the store for a place. At the next
   step boundary every rank and the replacement reconfigure the group under a new
   generation (torch's dist._reconfigure with everyone's handle; strata.torch.reform on a
   torch without it), and strata.torch.share_state() gives the replacement the model,
   checking every rank's SHA-256.

Every rank prints its step, group size, loss and the hash of its parameters at the end;
the launcher checks the hashes agree.
"""
import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import strata.torch as st

DIM = 64
RECONFIGURE = hasattr(dist, "_reconfigure")  # torch's reconfigure API (2.15)


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--kill-at", type=int, default=15, help="step at which the last rank kills itself")
    p.add_argument("--step-ms", type=float, default=150, help="compute time per step (a replacement needs a few "
                   "seconds to start)")
    p.add_argument("--timeout", type=float, default=120, help="seconds the whole run may take")
    p.add_argument("--worker", nargs=3, metavar=("ID", "RANK", "PORT"), help=argparse.SUPPRESS)
    return p.parse_args()


# ---- the workers ----


def batch(step, worker_id):
    """Each worker's data for a step: the same whoever asks, so any rank's result can be
    recomputed."""
    g = torch.Generator().manual_seed(step * 1000 + worker_id)
    x = torch.randn(32, DIM, generator=g)
    w_true = torch.linspace(-1, 1, DIM)
    return x, x @ w_true + 0.01 * torch.randn(32, generator=g)


class Trainer:
    def __init__(self, args, worker_id, store):
        self.args, self.id, self.store = args, worker_id, store
        self.w = torch.zeros(DIM)
        self.w_prev = self.w.clone()
        self.state = torch.zeros(3, dtype=torch.int64)  # step, generation, joiners taken in
        self.loss = float("nan")

    def step(self):
        step = int(self.state[0])
        if self.id == self.args.ranks - 1 and step == self.args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.args.step_ms / 1000)  # the forward and backward passes of a real model
        x, y = batch(step, self.id)
        w = self.w.clone().requires_grad_()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        # The gradient and, from rank 0, how many replacements wait for a place.
        pending = self.store.add("joiners", 0) - int(self.state[2]) if dist.get_rank() == 0 else 0
        buf = torch.cat([w.grad, torch.tensor([float(pending)])])
        dist.all_reduce(buf)
        self.w_prev = self.w.clone()
        self.w -= 0.05 * buf[:DIM] / dist.get_world_size()
        self.state[0] += 1
        self.loss = loss.item()
        return int(buf[DIM])

    def shrink(self):
        lost = st.lost_ranks()
        if not lost:
            raise
        rank, world = st.shrink(lost)
        # The interrupted step may have completed on some survivors only: all resume from
        # the step every one of them reached.
        agreed = self.state[:1].clone()
        dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
        if int(agreed[0]) < int(self.state[0]):
            self.w, self.state[0] = self.w_prev, agreed[0]
        st.share_state([self.w, self.state])
        print(f"worker {self.id}: lost rank(s) {lost}; shrunk to {world} ranks (now rank {rank}) "
              f"at step {int(self.state[0])}", flush=True)
        if rank == 0:
            self.store.set("shrunk", "1")

    def grow(self, pending):
        gen = int(self.state[1]) + 1
        world = dist.get_world_size() + pending
        rank = dist.get_rank()
        if rank == 0:
            for t in range(pending):
                self.store.set(f"place/{int(self.state[2]) + t}", f"{gen} {world - pending + t} {world}")
        regroup(self.store, rank, world, gen)
        self.after_reform(gen, pending)

    def after_reform(self, gen, pending):
        self.state[1], self.state[2] = gen, int(self.state[2]) + pending
        digest = st.share_state([self.w, self.state])
        print(f"worker {self.id}: re-formed with {dist.get_world_size()} ranks (rank {dist.get_rank()}), "
              f"generation {gen}, step {int(self.state[0])}, state {digest[:16]}", flush=True)

    def run(self):
        while int(self.state[0]) < self.args.steps:
            try:
                pending = self.step()
            except dist.DistBackendError:
                self.shrink()
                continue
            if pending > 0:
                self.grow(pending)
        digest = st.share_state([self.w])
        print(f"worker {self.id}: done at step {int(self.state[0])} with {dist.get_world_size()} ranks, "
              f"loss {self.loss:.5f}, parameters {digest}", flush=True)


def regroup(store, rank, world, gen):
    """Everyone in generation gen, in rank order: the members now and the replacements."""
    if not RECONFIGURE:
        st.reform(store, rank, world, f"gen-{gen}")
        return
    store.set(f"gen-{gen}/handle/{rank}", dist._get_reconfigure_handle())
    handles = [store.get(f"gen-{gen}/handle/{r}").decode() for r in range(world)]
    dist._reconfigure(gen, handles, timeout=timedelta(seconds=60)).wait()


def worker(args, worker_id, rank, port):
    os.environ["STRATA_REGION"] = "east" if worker_id % 2 == 0 else "west"
    os.environ["STRATA_HOST"] = f"host{worker_id}"
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=args.timeout))
    t = Trainer(args, worker_id, store)
    if rank >= 0:
        dist.init_process_group("strata", store=dist.PrefixStore("gen-0", store), rank=rank, world_size=args.ranks)
    else:  # a replacement: wait for a place at a step boundary
        ticket = store.add("joiners", 1) - 1
        gen, rank, world = map(int, store.get(f"place/{ticket}").decode().split())
        if RECONFIGURE:  # a group of its own, with no members until the others take it in
            dist.init_process_group("strata", store=dist.PrefixStore("gen-0", store), rank=0, world_size=1,
                                    enable_reconfigure=True)
        regroup(store, rank, world, gen)
        t.after_reform(gen, 0)  # gen and joiners come with the shared state
    t.run()
    dist.destroy_process_group()


# ---- the launcher ----


def launch(args):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = dict(os.environ, STRATA_TRANSPORT=os.environ.get("STRATA_TRANSPORT", "tcp"),
               STRATA_WAN_EMULATE=os.environ.get("STRATA_WAN_EMULATE", "delay=2ms"))

    def start(worker_id, rank):
        cmd = [sys.executable, __file__, "--worker", str(worker_id), str(rank), str(store.port), "--ranks",
               str(args.ranks), "--steps", str(args.steps), "--kill-at", str(args.kill_at), "--timeout", str(args.timeout),
               "--step-ms", str(args.step_ms)]
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs = [start(i, i) for i in range(args.ranks)]
    deadline = time.monotonic() + args.timeout
    replaced = False
    # Until the first workers are done: a replacement still waiting then has missed the run.
    while time.monotonic() < deadline and any(p.poll() is None for p in procs[:args.ranks]):
        if not replaced and store.check(["shrunk"]):
            procs.append(start(args.ranks, -1))
            replaced = True
        time.sleep(0.05)
    # A replacement that took part finishes its teardown after the first workers have
    # exited: give it a few seconds before counting it as stuck.
    grace = min(deadline, time.monotonic() + 20)
    while time.monotonic() < grace and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
    outputs = [p.communicate()[0] for p in procs]
    for i, out in enumerate(outputs):
        print(f"--- worker {i} (exit {procs[i].returncode})")
        print(out.rstrip())
    finals = [line.rsplit(" ", 1)[1] for out in outputs for line in out.splitlines() if " parameters " in line]
    ok = (procs[args.ranks - 1].returncode == -signal.SIGKILL and replaced and len(finals) == args.ranks
          and len(set(finals)) == 1 and all(p.returncode == 0 for i, p in enumerate(procs) if i != args.ranks - 1))
    print("RECOVERED: every rank finished with the same parameters" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    a = parse()
    if a.worker:
        worker(a, int(a.worker[0]), int(a.worker[1]), int(a.worker[2]))
    else:
        sys.exit(launch(a))
