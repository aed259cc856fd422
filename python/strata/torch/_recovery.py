"""Going on after a rank is lost, as torchft does: shrink the default group to the
survivors. On torch with the reconfigure API (2.15), shrink is that API's shrink (in
place, no store); growing and re-forming go through the API itself:

    dist.init_process_group("strata", enable_reconfigure=True)   # joiners too
    dist._reconfigure(uuid, handles).wait()   # handles: dist._get_reconfigure_handle() of each member

    try:
        dist.all_reduce(grad)
    except dist.DistBackendError:
        lost = strata.torch.lost_ranks()
        if not lost:
            raise
        rank, world = strata.torch.shrink(lost)     # no store needed: rank 0 may be gone

    # later, with new processes waiting:
    strata.torch.reform(store, new_rank, new_world, "gen-2")
    digest = strata.torch.share_state(list(model.parameters()))  # the joiners get the model
"""
from datetime import timedelta

import warnings

import torch
import torch.distributed as dist

from strata.torch._backend import backend_of

# A backend built by shrink(), handed to the next init_process_group("strata") instead of
# a new communicator from its store.
_adopt = []


def lost_ranks(group=None):
    """Ranks of the group known to be lost (their process died or stopped answering)."""
    return list(backend_of(group).lost_ranks())


def shrink(lost=None, timeout=timedelta(minutes=5), arbiter=None):
    """Replaces the default process group by the survivors' (every survivor calls it with
    the same ranks, by default those the group found lost). Returns (rank, world_size) in
    the new group: survivors keep their order and are renumbered densely.

    Only more than half of the group's ranks go on (ranks whose process is known gone do
    not count); exactly half only where `arbiter`, a torch Store outside every rank (the
    launcher's TCPStore, say), names them first. The others get a DistBackendError saying
    the quorum was lost: they may rejoin through dist._reconfigure (torch 2.15; reform()
    before it) once the others are reachable.

    On torch with the reconfigure API this is its shrink, in place: the process group
    stays and can grow again through dist._reconfigure."""
    old = backend_of()
    lost = sorted(lost if lost is not None else old.lost_ranks())
    if hasattr(dist, "_reconfigure"):  # the process group follows its backend's rank and size
        old._shrink_in_place(lost, timeout.total_seconds(), arbiter)
        return old.rank(), old.size()
    new = old._shrink(lost, arbiter)
    _adopt.append(new)
    dist.destroy_process_group()
    try:
        # The store is only a formality: the backend already exists.
        dist.init_process_group("strata", store=dist.HashStore(), rank=new.rank(), world_size=new.size(), timeout=timeout)
    finally:
        _adopt.clear()
    return new.rank(), new.size()


def reform(store, rank, world_size, generation, timeout=timedelta(minutes=5)):
    """Re-forms the default process group under `generation` (new for each re-forming) in
    `store`, a store no rank hosts (torch's TCPStore served by the launcher, say): the
    survivors and the replacements all call it. Then share the model with share_state.

    Deprecated where torch has the reconfigure API: every member (joiners initialised with
    enable_reconfigure=True) calls dist._reconfigure(uuid, handles) instead, which keeps
    the process group and needs no new rendezvous for the survivors' side."""
    if hasattr(dist, "_reconfigure"):
        warnings.warn("strata.torch.reform is deprecated: use torch.distributed._reconfigure "
                      "(init_process_group(..., enable_reconfigure=True) for new ranks)", DeprecationWarning,
                      stacklevel=2)
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("strata", store=dist.PrefixStore(generation, store), rank=rank, world_size=world_size,
                            timeout=timeout)


def share_state(tensors, root=0, group=None):
    """Broadcasts root's tensors (contiguous CPU tensors, in place) to every rank and checks
    that every rank now hashes them alike (SHA-256); returns the hex digest."""
    with torch.no_grad():
        return backend_of(group).share_state([t.data if isinstance(t, torch.nn.Parameter) else t for t in tensors],
                                             root)
