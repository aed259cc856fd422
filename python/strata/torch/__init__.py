"""torch.distributed backend ``"strata"`` and a compressing DDP comm hook.

    import strata.torch                       # registers the backend
    dist.init_process_group("strata")         # torchrun, tcp://, file://, env://
    model = DDP(model)
    state = strata.torch.CompressionState("topk:0.01+int8")
    model.register_comm_hook(state, strata.torch.compress_hook)

After a lost rank (``lost_ranks``), ``shrink`` the group to the survivors, or ``reform`` it
with replacements and ``share_state`` the model to them.

Locality (``STRATA_REGION``, ``STRATA_CLUSTER``, ...) and every other ``STRATA_*``
setting apply as they do to the C++ API; the rendezvous is torch's store.
"""
import torch
import torch.distributed as dist

from strata import _C
from strata.torch._hook import CompressionState, compress_hook
from strata.torch._backend import backend_of
from strata.torch._recovery import _adopt, lost_ranks, reform, share_state, shrink

__all__ = ["CompressionState", "compress_hook", "backend_of", "StrataBackend", "lost_ranks", "shrink", "reform",
           "share_state"]

StrataBackend = _C.StrataBackend


def _create(store, rank, world_size, timeout):
    if _adopt:  # shrink(): the survivors' backend already exists
        backend = _adopt.pop()
        if (backend.rank(), backend.size()) != (rank, world_size):
            raise ValueError(f"strata: the shrunk group is rank {backend.rank()} of {backend.size()}, "
                             f"not {rank} of {world_size}")
        return backend
    return _C.StrataBackend(store, rank, world_size, timeout.total_seconds())


def _register():
    if "strata" in dist.Backend.backend_list:
        return
    devices = ["cpu", "cuda"] if torch.backends.cuda.is_built() else ["cpu"]
    dist.Backend.register_backend("strata", _create, devices=devices)


_register()
