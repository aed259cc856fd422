"""torch.distributed backend ``"strata"`` and a compressing DDP comm hook.

    import strata.torch                       # registers the backend
    dist.init_process_group("strata")         # torchrun, tcp://, file://, env://
    model = DDP(model)
    state = strata.torch.CompressionState("topk:0.01+int8")
    model.register_comm_hook(state, strata.torch.compress_hook)

After a lost rank (``lost_ranks``), ``shrink`` the group to the survivors. torch's own
reconfigure API works too (torch 2.15): ``init_process_group("strata",
enable_reconfigure=True)``, ``dist._get_reconfigure_handle()``, ``dist._reconfigure(uuid,
handles)`` shrink, grow, merge and split the group; ``share_state`` brings the model to new
members. ``reform`` is deprecated in favour of it.

Locality (``STRATA_REGION``, ``STRATA_CLUSTER``, ...) and every other ``STRATA_*``
setting apply as they do to the C++ API; the rendezvous is torch's store.
"""
import atexit

import torch
import torch.distributed as dist

from strata import _C
from strata.torch._diloco import DiLoCo, nesterov_sgd, region_group
from strata.torch._hook import CompressionState, compress_hook
from strata.torch._backend import backend_of
from strata.torch._recovery import _adopt, lost_ranks, reform, share_state, shrink

__all__ = ["CompressionState", "compress_hook", "backend_of", "StrataBackend", "lost_ranks", "shrink", "reform",
           "share_state", "DiLoCo", "nesterov_sgd", "region_group"]

StrataBackend = _C.StrataBackend


def _create(opts, _backend_options=None):
    """torch's extended creator: opts is a _DistributedBackendOptions (enable_reconfigure
    from torch 2.15 on)."""
    rank, world_size = opts.group_rank, opts.group_size
    if _adopt:  # shrink() on torch without the reconfigure API: the survivors' backend exists
        backend = _adopt.pop()
        if (backend.rank(), backend.size()) != (rank, world_size):
            raise ValueError(f"strata: the shrunk group is rank {backend.rank()} of {backend.size()}, "
                             f"not {rank} of {world_size}")
        return backend
    return _C.StrataBackend(opts.store, rank, world_size, opts.timeout.total_seconds(),
                            enable_reconfigure=getattr(opts, "enable_reconfigure", False))


def _register():
    if "strata" in dist.Backend.backend_list:
        return
    devices = ["cpu", "cuda"] if torch.backends.cuda.is_built() else ["cpu"]
    dist.Backend.register_backend("strata", _create, extended_api=True, devices=devices)


_register()
# Works still completing at exit release their tensors while Python can still take them.
atexit.register(_C._drain_all)
