"""A DDP comm hook running strata's compressed allreduce on each gradient bucket."""
import torch
import torch.distributed as dist

from strata.torch._backend import backend_of


class CompressionState:
    """What the hook needs across steps.

    spec: strata's compression ("topk:0.01+int8", "int8", "fp16", ... or "none" for the
    exact allreduce). Only the shard that crosses regions is compressed; error feedback
    keeps what was not sent per bucket and adds it to the next step, so the sum of what
    is delivered converges to the sum of the gradients.

    momentum: DGC's momentum correction. With momentum m > 0 the hook keeps a velocity
    per bucket on each rank (u = m u + g) and sends u, so what error feedback holds back
    is velocity, not a gradient the optimizer's momentum has already moved past; give
    the optimizer momentum 0 then. Without compression this equals SGD with momentum m.

    warmup_steps: steps that run exact before compression starts (DGC's warm-up: the
    first steps move the weights most, and compressing them costs the most accuracy).

    The residuals live in the communicator; ``state_dict()`` snapshots them (and the
    velocities, which are optimizer state) with a checkpoint and ``load_state_dict()``
    puts them back (same world and layout).
    """

    def __init__(self, spec="topk:0.01+int8", group=None, warmup_steps=0, momentum=0.0):
        self.spec = spec
        self.momentum = momentum
        self._velocity = {}
        self.group = group
        self.warmup_steps = warmup_steps
        self.steps = 0

    def _backend(self, device):
        return backend_of(self.group, "cuda" if device.type == "cuda" else "cpu")

    def state_dict(self):
        return {"spec": self.spec, "steps": self.steps, "warmup_steps": self.warmup_steps,
                "momentum": self.momentum, "velocity": {k: v.detach().cpu() for k, v in self._velocity.items()},
                "residuals": self._backend(torch.device("cpu")).save_residuals()}

    def load_state_dict(self, sd):
        if sd["spec"] != self.spec:
            raise ValueError(f"checkpoint was taken with compression {sd['spec']!r}, this state uses {self.spec!r}")
        self._backend(torch.device("cpu")).restore_residuals(sd["residuals"])
        self._load(sd)

    def _load(self, sd):
        self.steps, self.warmup_steps = sd["steps"], sd["warmup_steps"]
        self.momentum, self._velocity = sd["momentum"], dict(sd["velocity"])

    # torch.save(state) takes the same path; the residuals go back into the
    # communicator at the hook's next call, when the process group exists.
    def __getstate__(self):
        return self.state_dict()

    def __setstate__(self, sd):
        self.spec, self.group = sd["spec"], None
        self._load(sd)
        self._pending = sd["residuals"]


def compress_hook(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Averages the bucket over the group with strata's (compressed) allreduce."""
    pending = state.__dict__.pop("_pending", None)
    if pending is not None:  # restored by unpickling: the communicator exists by now
        state._backend(bucket.buffer().device).restore_residuals(pending)
    tensor = bucket.buffer()
    backend = state._backend(tensor.device)
    # Exact where compression cannot apply (strata compresses f32). Residuals are kept
    # per bucket; DDP rebuilds its buckets after the first step, and a bucket whose
    # layout changed starts afresh instead of adding another layout's residual.
    warm = state.steps >= state.warmup_steps
    spec = state.spec if tensor.dtype == torch.float32 and warm else "none"
    key = f"ddp.bucket{bucket.index()}:{tensor.numel()}"
    keys = state.__dict__.setdefault("_keys", {})
    old = keys.get(bucket.index())
    if old is not None and old != key:
        backend.reset_residuals(old)
        state._velocity.pop(old, None)
    keys[bucket.index()] = key
    if state.momentum:
        u = state._velocity.get(key)
        if u is None or u.shape != tensor.shape:
            u = state._velocity[key] = torch.zeros_like(tensor)
        elif u.device != tensor.device:  # restored from a checkpoint
            u = state._velocity[key] = u.to(tensor.device)
        u.mul_(state.momentum).add_(tensor)
        tensor.copy_(u)
    work = backend.allreduce_compressed(tensor, spec, key)
    if bucket.is_last():
        state.steps += 1
    return work.get_future().then(lambda fut: fut.value()[0])
