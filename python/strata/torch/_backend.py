import torch
import torch.distributed as dist

from strata import _C


def backend_of(group=None, device="cpu"):
    """The StrataBackend behind a process group (the default group if None)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device(device))
    if not isinstance(backend, _C.StrataBackend):
        raise ValueError(f"process group {pg} does not run on the strata backend (it has {type(backend).__name__})")
    return backend
