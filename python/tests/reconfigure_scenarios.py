"""What each rank runs for test_reconfigure.py: torch's reconfigure API on strata.

python reconfigure_scenarios.py NAME RANK WORLD INIT TMPDIR. The store is a TCPStore the
test process serves (STORE_PORT), outside every rank, as a launcher's would be. Each
scenario changes the membership as torch's own fault-tolerance tests do, then checks an
exact allreduce over the new members on random data against a reference, and prints
"rank R: NAME ok as rank r of n"."""
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

import strata.torch  # noqa: F401  registers "strata"

TIMEOUT = datetime.timedelta(seconds=60)


class Rank:
    def __init__(self):
        self.name, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        self.rank, self.world = rank, world  # the process's own number, for the whole scenario
        self.store = dist.TCPStore("127.0.0.1", int(os.environ["STORE_PORT"]), is_master=False, timeout=TIMEOUT)

    def init(self, enable_reconfigure=True, rank=None, world=None):
        dist.init_process_group("strata", store=self.store, rank=self.rank if rank is None else rank,
                                world_size=self.world if world is None else world, timeout=TIMEOUT,
                                enable_reconfigure=enable_reconfigure)
        assert dist._supports_reconfigure()

    def handles(self, key, among=None):
        """Everyone's current handle (among: those processes only), through the store."""
        among = range(self.world) if among is None else among
        self.store.set(f"{key}/{self.rank}", dist._get_reconfigure_handle())
        return [self.store.get(f"{key}/{r}").decode() for r in among]

    def barrier(self, key, among=None):
        among = range(self.world) if among is None else among
        self.store.set(f"{key}/{self.rank}", "1")
        for r in among:
            self.store.get(f"{key}/{r}")

    def reconfigure(self, uuid, handles, **kw):
        dist._reconfigure(uuid, handles, timeout=TIMEOUT, **kw).wait()

    def check(self, members):
        """members: the processes of the group now, in rank order."""
        assert dist.get_world_size() == len(members), (dist.get_world_size(), members)
        assert dist.get_rank() == members.index(self.rank), (dist.get_rank(), members)
        for n in (0, 1, 7, 1003):
            for dtype in (torch.float64, torch.int64):
                ins = [_data(1000 * n + m, n, dtype) for m in members]
                t = ins[dist.get_rank()].clone()
                dist.all_reduce(t)
                want = torch.stack(ins).sum(0)
                ok = torch.allclose(t, want, rtol=1e-12, atol=1e-12) if dtype.is_floating_point else torch.equal(t, want)
                assert ok, f"allreduce of {n} {dtype} over {members}: {t[:4].tolist()} want {want[:4].tolist()}"
        t = torch.full((5,), 42.0) if dist.get_rank() == 0 else torch.zeros(5)
        dist.broadcast(t, group_src=0)
        assert torch.equal(t, torch.full((5,), 42.0))

    def done(self):
        print(f"rank {self.rank}: {self.name} ok as rank {dist.get_rank()} of {dist.get_world_size()}", flush=True)


def _data(seed, n, dtype):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g, dtype=dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def _refused(f, kind, text):
    try:
        f()
    except kind as e:
        assert text in str(e), str(e)
        return str(e)
    raise AssertionError(f"no {kind.__name__} saying {text!r}")


def shrink_last(p):
    """From a group init_process_group made (no enable_reconfigure): the last rank is left
    out; the others shrink through strata's shrink (2 of 3, a majority)."""
    p.init(enable_reconfigure=False)
    handles = p.handles("all")
    if p.rank < p.world - 1:
        p.reconfigure(401, handles[:-1])
        p.check(list(range(p.world - 1)))
        p.done()
    p.barrier("done")


def shrink_middle(p):
    p.init()
    p.reconfigure(500, p.handles("init"))
    handles = p.handles("post")
    middle = p.world // 2
    if p.rank != middle:
        p.reconfigure(501, [h for r, h in enumerate(handles) if r != middle])
        p.check([r for r in range(p.world) if r != middle])
        p.done()
    p.barrier("done")


def scale_down_up(p):
    p.init()
    p.reconfigure(600 + p.rank, [dist._get_reconfigure_handle()])
    p.check([p.rank])
    p.reconfigure(603, p.handles("all"))
    p.check(list(range(p.world)))
    # Alone out of three is no majority: strata refuses unless the caller decides.
    _refused(lambda: p.reconfigure(604 + p.rank, [dist._get_reconfigure_handle()]), dist.DistBackendError,
             "strata.quorum")
    p.check(list(range(p.world)))  # the group is as it was
    p.reconfigure(604 + p.rank, [dist._get_reconfigure_handle()], hints={"strata.quorum": "caller"})
    p.check([p.rank])
    p.done()
    p.barrier("done")


def late_join(p):
    p.init()
    handles = p.handles("initial")
    first = p.world // 2
    if p.rank < first:
        p.reconfigure(900, handles[:first])
        p.check(list(range(first)))
    else:
        _refused(lambda: dist.all_reduce(torch.ones(1)), RuntimeError, "enable_reconfigure")
    p.reconfigure(901, p.handles("all"))
    p.check(list(range(p.world)))
    p.done()


def merge_split(p):
    p.init()
    handles = p.handles("initial")
    split = p.world // 2
    side = list(range(split)) if p.rank < split else list(range(split, p.world))
    p.reconfigure(1000 if p.rank < split else 1001, [handles[r] for r in side])
    p.check(side)
    p.reconfigure(1002, p.handles("all"))
    p.check(list(range(p.world)))
    # Reversed order: ranks follow the list.
    p.reconfigure(1003, p.handles("again")[::-1])
    p.check(list(range(p.world))[::-1])
    p.done()


def identity(p):
    p.init()
    p.reconfigure(800, p.handles("init"))
    p.check(list(range(p.world)))
    handles = p.handles("again")
    # Refused on every rank before anything changes: the group stays usable.
    mine = dist._get_reconfigure_handle()
    _refused(lambda: p.reconfigure(802, [h for h in handles if h != mine]), ValueError, "is not among")
    _refused(lambda: p.reconfigure(802, handles + [mine]), ValueError, "appears twice")
    _refused(lambda: p.reconfigure(802, handles + ["gloo:0:1:2:"]), ValueError, "not a strata reconfigure handle")
    _refused(lambda: p.reconfigure(802, handles, hints={"strata.quorom": "caller"}), ValueError, "unknown hint")
    p.check(list(range(p.world)))
    p.reconfigure(801, handles)
    p.check(list(range(p.world)))
    p.done()


def reused_uuid(p):
    p.init()
    p.reconfigure(1100 + p.rank, [dist._get_reconfigure_handle()])
    _refused(lambda: p.reconfigure(1100 + p.rank, [dist._get_reconfigure_handle()]), ValueError, "already used")
    # Used by another group: its first rank's claim in the store stands.
    handles = p.handles("all")
    _refused(lambda: p.reconfigure(1100, handles), ValueError, "already used")
    p.reconfigure(1110, handles)
    p.check(list(range(p.world)))
    p.done()


def after_abort(p):
    p.init()
    p.reconfigure(1200, p.handles("init"))
    strata.torch.backend_of().abort()
    _refused(lambda: dist.all_reduce(torch.ones(3)), RuntimeError, "abort")
    p.reconfigure(1201, p.handles("recover"))
    p.check(list(range(p.world)))
    p.done()


def killed(p):
    """The last process dies mid-training; the survivors shrink to themselves (no store
    needed); a replacement process, the extra one, then joins them (late initialisation)
    and receives the parameters."""
    world = p.world - 1  # the last process is the replacement
    if p.rank == world:
        p.store.wait(["shrunk/0"], TIMEOUT)
        p.init(rank=0, world=1)  # its own group until it is configured
    else:
        p.init(enable_reconfigure=False, world=world)
        handles = p.handles("all", among=range(world))
        t = torch.ones(1000)
        try:
            for step in range(1000):
                if p.rank == world - 1 and step == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                dist.all_reduce(t)
                t.fill_(1)
            raise AssertionError("no error after a rank was killed")
        except dist.DistBackendError as e:
            lost = strata.torch.lost_ranks()
            print(f"rank {p.rank}: lost {lost}: {str(e)[:120]}", flush=True)
            assert lost == [world - 1], lost
        p.reconfigure(2000, handles[:world - 1])
        p.check(list(range(world - 1)))
        p.store.set(f"shrunk/{p.rank}", "1")
    members = list(range(world - 1)) + [world]
    handles = p.handles("grown", among=members)
    p.reconfigure(2001, handles)
    params = torch.arange(10, dtype=torch.float64) if p.rank == 0 else torch.zeros(10, dtype=torch.float64)
    strata.torch.share_state([params])
    assert torch.equal(params, torch.arange(10, dtype=torch.float64))
    p.check(members)
    p.done()


SCENARIOS = {f.__name__: f for f in (shrink_last, shrink_middle, scale_down_up, late_join, merge_split, identity,
                                      reused_uuid, after_abort, killed)}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](Rank())
