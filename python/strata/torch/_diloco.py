"""DiLoCo (arXiv 2311.08105) and its streaming form (arXiv 2501.18512) on strata.

    region = strata.torch.region_group()                 # this rank's region
    model = DDP(net, process_group=region)               # inner steps: inside the region
    inner = torch.optim.AdamW(net.parameters(), lr=4e-4)
    diloco = strata.torch.DiLoCo(net, inner, sync_every=50, compression="int4")
    for x, y in data:
        loss_fn(model(x), y).backward()
        inner.step(); inner.zero_grad()
        diloco.step()                                    # every H steps: the outer step

Every replica (a region, its ranks holding identical parameters through DDP) keeps the
global parameters. Every `sync_every` inner steps it averages the pseudo-gradient
"global minus local" over the outer group (by default the whole world, ranks weighted
alike, so equal regions weigh alike) with strata's allreduce: the hierarchy reduces inside
each region first and only a 1/P shard per rank crosses regions, compressed on request.
The outer optimizer (SGD with Nesterov momentum by default, as in the paper) steps the
global parameters with it, identically on every replica, and the local parameters start
again from them.

Streaming: `fragments=F` splits the parameters into F fragments synced at staggered
steps (fragment f at steps where step % H == f*H//F); with `delay=d > 0` a fragment's
outer allreduce runs while the next d inner steps do, and is applied when they are done:
global parameters stepped as above, local ones mixed, local <- mix*local + (1-mix)*global.
"""
import time

import torch
import torch.distributed as dist

from strata.torch._backend import backend_of


def region_group():
    """The process group of this rank's region (STRATA_REGION), made on every rank in the
    same order (a collective over the default group, like dist.new_group)."""
    backend = backend_of()
    regions = [backend.locality(r)["region"] for r in range(dist.get_world_size())]
    mine = None
    for name in sorted(set(regions)):
        g = dist.new_group([r for r, n in enumerate(regions) if n == name])
        if name == regions[dist.get_rank()]:
            mine = g
    return mine


def nesterov_sgd(params, lr=0.7, momentum=0.9):
    """The paper's outer optimizer."""
    return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)


class DiLoCo:
    """Outer synchronisation of `model` (whose parameters `inner_optimizer` steps).

    sync_every: H, inner steps between two syncs of a fragment.
    outer_optimizer: a function of the global parameters returning the outer optimizer
        (default nesterov_sgd, lr 0.7, momentum 0.9).
    compression: strata's spec for the pseudo-gradients ("none", "int8", "int4",
        "topk:0.01+int8", ...); error feedback per fragment.
    group: the outer group (default: the default group).
    fragments, delay, mix: streaming (module doc). delay < sync_every // fragments, so a
        fragment's sync is applied before the next fragment's starts.
    """

    def __init__(self, model, inner_optimizer, sync_every=50, outer_optimizer=None, compression="none", group=None,
                 fragments=1, delay=0, mix=0.5, key="diloco"):
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("DiLoCo: the model has no trainable parameters")
        if sync_every < 1 or fragments < 1 or fragments > min(sync_every, len(params)):
            raise ValueError(f"DiLoCo: fragments={fragments} must be 1..min(sync_every={sync_every}, "
                             f"{len(params)} parameters)")
        if not 0 <= delay < max(1, sync_every // fragments):
            raise ValueError(f"DiLoCo: delay={delay} must be below sync_every // fragments = "
                             f"{sync_every // fragments}")
        self.inner_optimizer = inner_optimizer
        self.sync_every, self.fragments, self.delay, self.mix = sync_every, fragments, delay, mix
        self.compression, self.group, self.key = compression, group, key
        self.local = params
        self.global_params = [p.detach().to(torch.float32, copy=True) for p in params]
        self.outer_optimizer = (outer_optimizer or nesterov_sgd)(self.global_params)
        # Contiguous runs of parameters, about equal in size.
        sizes = [p.numel() for p in params]
        total, bounds, acc = sum(sizes), [0], 0
        for i, n in enumerate(sizes):
            acc += n
            if len(bounds) < fragments and acc >= total * len(bounds) / fragments and i + 1 < len(params):
                bounds.append(i + 1)
        while len(bounds) < fragments:  # tiny parameters first: still F non-empty runs
            bounds.append(bounds[-1] + 1)
        bounds.append(len(params))
        self._fragments = [range(bounds[f], bounds[f + 1]) for f in range(fragments)]
        self.steps = 0
        self.wait_seconds = 0.0  # time the inner loop spent blocked on outer allreduces
        self._in_flight = {}  # fragment -> (work, pseudo-gradient, step it is due)

    # ---- the loop

    def step(self):
        """Call after each inner optimizer step."""
        self.steps += 1
        for f, (work, delta, due) in list(self._in_flight.items()):
            if self.steps >= due:
                self._apply(f, work, delta)
        for f in range(self.fragments):
            if self.steps % self.sync_every == (f * self.sync_every // self.fragments) % self.sync_every:
                self._start(f)
                if self.delay == 0:
                    self._apply(f, *self._in_flight[f][:2])

    def sync(self):
        """Applies every fragment's sync in flight (before a checkpoint or an evaluation)."""
        for f, (work, delta, _) in list(self._in_flight.items()):
            self._apply(f, work, delta)

    def _start(self, f):
        idx = self._fragments[f]
        with torch.no_grad():
            delta = torch.cat([(self.global_params[i] - self.local[i].detach().float()).reshape(-1) for i in idx])
        backend = backend_of(self.group, "cuda" if delta.is_cuda else "cpu")
        work = backend.allreduce_compressed(delta, self.compression, f"{self.key}/fragment{f}")
        self._in_flight[f] = (work, delta, self.steps + self.delay)

    def _apply(self, f, work, delta):
        t = time.monotonic()
        work.wait()
        self.wait_seconds += time.monotonic() - t
        del self._in_flight[f]
        idx = self._fragments[f]
        offset = 0  # only this fragment's parameters have a gradient: the others' are None
        for i in idx:
            g = self.global_params[i]
            g.grad = delta[offset:offset + g.numel()].view_as(g)
            offset += g.numel()
        self.outer_optimizer.step()
        with torch.no_grad():
            for i in idx:
                g, p = self.global_params[i], self.local[i]
                g.grad = None
                if self.delay:
                    p.mul_(self.mix).add_(g.to(p.dtype), alpha=1 - self.mix)
                else:
                    p.copy_(g)

    def recover(self, root=0):
        """After a lost replica: once the outer group has shrunk (strata.torch.shrink, or
        dist._reconfigure), call on every rank of it. Syncs in flight on the old group are
        dropped (some ranks may have applied one the others did not), every rank takes
        root's global parameters, outer state and step, and the local parameters start
        again from the global ones. Returns the global parameters' digest."""
        self._in_flight.clear()
        digest = self.share_state(root)
        with torch.no_grad():
            for g, p in zip(self.global_params, self.local):
                p.copy_(g)
        return digest

    # ---- state

    def state_dict(self):
        """The global parameters, the outer optimizer's state and the step; syncs in flight
        are applied first. The residuals of compressed syncs are the communicator's
        (strata.torch's save_residuals through CompressionState, or left to restart)."""
        self.sync()
        return {"steps": self.steps, "global": [g.detach().clone() for g in self.global_params],
                "outer": self.outer_optimizer.state_dict(), "sync_every": self.sync_every,
                "fragments": self.fragments}

    def load_state_dict(self, sd):
        if (sd["sync_every"], sd["fragments"]) != (self.sync_every, self.fragments):
            raise ValueError(f"DiLoCo: the state is for sync_every={sd['sync_every']}, fragments={sd['fragments']}; "
                             f"this one has {self.sync_every}, {self.fragments}")
        self._in_flight.clear()
        self.steps = sd["steps"]
        with torch.no_grad():
            for g, saved, p in zip(self.global_params, sd["global"], self.local):
                g.copy_(saved)
                p.copy_(saved)
        self.outer_optimizer.load_state_dict(sd["outer"])

    def share_state(self, root=0):
        """Gives every rank of the outer group root's state (a rank that joined, say) and
        checks every rank now holds the same global parameters; returns their digest."""
        from strata.torch._recovery import share_state

        box = [self.state_dict() if dist.get_rank(self.group) == root else None]
        dist.broadcast_object_list(box, group_src=root, group=self.group)
        if dist.get_rank(self.group) != root:
            self.load_state_dict(box[0])
        return share_state(self.global_params, root=root, group=self.group)
