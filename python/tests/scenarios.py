"""What each rank process runs for the tests: python scenarios.py NAME RANK WORLD INIT TMPDIR [ARGS].

Inputs are drawn from seeds every rank knows, so each rank computes the reference of a
collective from all ranks' inputs by itself. A failed check raises (exit code 1)."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import strata.torch  # noqa: F401  registers "strata"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8,
          torch.uint8]
# Where the checks put their tensors: collectives_cuda moves them to the rank's GPU.
DEV = torch.device("cpu")

OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.AVG: "avg", dist.ReduceOp.MIN: "min", dist.ReduceOp.MAX: "max",
       dist.ReduceOp.PRODUCT: "prod"}


def init(backend="strata", timeout_s=60, **kw):
    _, _, rank, world, method, _ = sys.argv[:6]
    dist.init_process_group(backend, init_method=method, rank=int(rank), world_size=int(world),
                            timeout=datetime.timedelta(seconds=timeout_s), **kw)
    return dist.get_rank(), dist.get_world_size()


def on(t):
    """A copy of t on the device the scenario runs on."""
    return t.to(DEV, copy=True)


def data(seed, n, dtype, small=False):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    lo, hi = (1, 3) if small else (0, 10)  # products of small values stay in range
    if dtype == torch.int8 and not small:
        lo, hi = -10, 10
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dtype)


def reduce_ref(tensors, op):
    x = torch.stack([t.to(torch.float64) if t.dtype.is_floating_point else t.to(torch.int64) for t in tensors])
    if op == "sum":
        r = x.sum(0)
    elif op == "avg":
        r = x.mean(0)
    elif op == "min":
        r = x.min(0).values
    elif op == "max":
        r = x.max(0).values
    else:
        r = x.prod(0)
    return r.to(tensors[0].dtype)


def close(got, want, what):
    got, want = got.cpu(), want.cpu()
    if want.dtype.is_floating_point:
        tol = {torch.float16: 2e-2, torch.bfloat16: 5e-2}.get(want.dtype, 1e-5)
        ok = torch.allclose(got.to(torch.float64), want.to(torch.float64), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError(f"{what}: got {got[:8].tolist()}... want {want[:8].tolist()}...")


def sizes(world):
    return [0, 1, 7, 1000 + world]


def check_allreduce(rank, world, group=None, members=None):
    members = members or list(range(world))
    seed = 0
    for dtype in DTYPES:
        for op, name in OPS.items():
            if name == "avg" and not dtype.is_floating_point:
                continue
            for n in sizes(world):
                seed += 1
                ins = [data(seed * 100 + r, n, dtype, small=(name == "prod")) for r in members]
                t = on(ins[members.index(rank)])
                dist.all_reduce(t, op=op, group=group)
                close(t, reduce_ref(ins, name), f"all_reduce {dtype} {name} n={n}")
    # A non-contiguous tensor is reduced in place through a contiguous copy.
    base = data(7, 6 * 5, torch.float32).view(6, 5)
    t = on(base).t()
    dist.all_reduce(t, group=group)
    close(t, base.t() * len(members), "all_reduce of a transposed tensor")
    # async_op: the future's value is the reduced tensor.
    t = on(torch.ones(3))
    w = dist.all_reduce(t, async_op=True, group=group)
    v = w.get_future().wait()[0]
    close(v, torch.full((3,), float(len(members))), "all_reduce future value")
    if not w.is_completed():
        raise AssertionError("work not completed after its future")


def check_rooted(rank, world):
    for root in sorted({0, world - 1}):
        for n in sizes(world):
            src = data(500 + root + n, n, torch.float32)
            t = on(src if rank == root else torch.zeros(n))
            dist.broadcast(t, src=root)
            close(t, src, f"broadcast root {root} n={n}")
            ins = [data(600 + r + n, n, torch.int64) for r in range(world)]
            t = on(ins[rank])
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
            if rank == root:
                close(t, reduce_ref(ins, "sum"), f"reduce root {root} n={n}")
            # gather and scatter
            g = [on(torch.empty(n)) for _ in range(world)] if rank == root else None
            dist.gather(on(data(700 + rank + n, n, torch.float32)), gather_list=g, dst=root)
            if rank == root:
                for r in range(world):
                    close(g[r], data(700 + r + n, n, torch.float32), f"gather from {r} n={n}")
            out = on(torch.empty(n))
            sl = [on(data(800 + r + n, n, torch.float32)) for r in range(world)] if rank == root else None
            dist.scatter(out, scatter_list=sl, src=root)
            close(out, data(800 + rank + n, n, torch.float32), f"scatter to {rank} n={n}")


def check_gathers(rank, world, dtypes=(torch.float32, torch.int32, torch.bfloat16)):
    for dtype in dtypes:
        for n in sizes(world):
            mine = on(data(900 + rank + n, n, dtype))
            want = [data(900 + r + n, n, dtype) for r in range(world)]
            outs = [on(torch.empty(n, dtype=dtype)) for _ in range(world)]
            dist.all_gather(outs, mine)
            for r in range(world):
                close(outs[r], want[r], f"all_gather {dtype} from {r} n={n}")
            flat = on(torch.empty(world * n, dtype=dtype))
            dist.all_gather_into_tensor(flat, mine)  # out of place
            close(flat, torch.cat(want), f"all_gather_into_tensor {dtype} n={n}")
            flat = on(torch.zeros(world * n, dtype=dtype))
            flat[rank * n:(rank + 1) * n] = mine
            dist.all_gather_into_tensor(flat, flat[rank * n:(rank + 1) * n])  # in place
            close(flat, torch.cat(want), f"all_gather_into_tensor in place {dtype} n={n}")
            # reduce_scatter: rank r's input block j goes to rank j.
            ins = [[data(1000 + r * 31 + j + n, n, dtype) for j in range(world)] for r in range(world)]
            out = on(torch.empty(n, dtype=dtype))
            dist.reduce_scatter(out, [on(x) for x in ins[rank]])
            close(out, reduce_ref([ins[r][rank] for r in range(world)], "sum"), f"reduce_scatter {dtype} n={n}")
            out = on(torch.empty(n, dtype=dtype))
            dist.reduce_scatter_tensor(out, on(torch.cat(ins[rank])))
            close(out, reduce_ref([ins[r][rank] for r in range(world)], "sum"), f"reduce_scatter_tensor {dtype} n={n}")
            # all_gather_coalesced: outs[r][k] is rank r's input k (torch wants one dtype).
            mine = [data(1400 + rank + n, n, dtype), data(1450 + rank + n, n + 1, dtype)]
            outs = [[on(torch.empty(n, dtype=dtype)), on(torch.empty(n + 1, dtype=dtype))] for _ in range(world)]
            dist.all_gather_coalesced(outs, [on(x) for x in mine])
            for r in range(world):
                close(outs[r][0], data(1400 + r + n, n, dtype), f"all_gather_coalesced {dtype} from {r} n={n}")
                close(outs[r][1], data(1450 + r + n, n + 1, dtype), f"all_gather_coalesced {dtype} from {r} n={n + 1}")


def check_alltoall(rank, world):
    for n in (0, 1, 5):
        # Equal splits over rows of 3 columns.
        inp = on(torch.stack([data(1100 + rank * 17 + j + n, 3 * n, torch.float32) for j in range(world)]))
        out = torch.empty_like(inp)
        dist.all_to_all_single(out.view(-1), inp.view(-1))
        for j in range(world):
            close(out[j], data(1100 + j * 17 + rank + n, 3 * n, torch.float32), f"all_to_all_single from {j} n={n}")
    # Uneven: rank i sends (i + j) % 3 + n rows to rank j.
    for n in (0, 2):
        split = lambda i, j: (i + j) % 3 + n  # noqa: E731
        ins = [on(data(1200 + rank * 13 + j, split(rank, j) * 4, torch.int64).view(-1, 4)) for j in range(world)]
        inp = torch.cat(ins)
        out = on(torch.empty(sum(split(j, rank) for j in range(world)), 4, dtype=torch.int64))
        dist.all_to_all_single(out, inp, output_split_sizes=[split(j, rank) for j in range(world)],
                               input_split_sizes=[split(rank, j) for j in range(world)])
        want = torch.cat([data(1200 + j * 13 + rank, split(j, rank) * 4, torch.int64).view(-1, 4) for j in range(world)])
        close(out, want, f"all_to_all_single uneven n={n}")
        outs = [on(torch.empty(split(j, rank), 4, dtype=torch.int64)) for j in range(world)]
        dist.all_to_all(outs, ins)
        close(torch.cat(outs), want, f"all_to_all list n={n}")


def check_p2p(rank, world):
    if world == 1:
        return
    for n in (0, 1, 1001):
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        s = dist.isend(on(data(1300 + rank + n, n, torch.float32)), nxt)
        t = on(torch.empty(n))
        dist.recv(t, prv)
        s.wait()
        close(t, data(1300 + prv + n, n, torch.float32), f"send/recv n={n}")
        t = on(torch.empty(n))
        ops = [dist.P2POp(dist.isend, on(data(1350 + rank + n, n, torch.float32)), nxt), dist.P2POp(dist.irecv, t, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        close(t, data(1350 + prv + n, n, torch.float32), f"batch_isend_irecv n={n}")
    # From any source: rank 0 takes two messages from every other rank, blocking and not.
    if rank == 0:
        seen = []
        for k in range(2 * (world - 1)):
            t = on(torch.empty(1001))
            if k % 2 == 0:
                src = dist.recv(t)
            else:
                w = dist.irecv(t)
                w.wait()
                src = w._source_rank()
            seen.append(src)
            close(t, data(1400 + 10 * src + seen.count(src), 1001, torch.float32), f"recv from any source ({src})")
        assert sorted(seen) == sorted(list(range(1, world)) * 2), seen
    else:
        for k in (1, 2):
            dist.send(on(data(1400 + 10 * rank + k, 1001, torch.float32)), 0)


def collectives():
    rank, world = init()
    check_allreduce(rank, world)
    check_rooted(rank, world)
    check_gathers(rank, world)
    check_alltoall(rank, world)
    check_p2p(rank, world)
    dist.barrier()
    # A subgroup is its own communicator: the even ranks, then every rank but 0.
    for members in ([r for r in range(world) if r % 2 == 0], list(range(1, world))):
        if not members:
            continue
        g = dist.new_group(members)
        if rank in members:
            check_allreduce(rank, world, group=g, members=members)
    dist.barrier()
    dist.destroy_process_group()
    print("collectives ok")


def debug_detail():
    """Under TORCH_DISTRIBUTED_DEBUG=DETAIL torch wraps the group in its checker, which
    compares every collective's fingerprint and sequence number across ranks first."""
    import warnings
    warnings.filterwarnings("ignore", message=".*all_gather_coalesced.*")
    rank, world = init()
    check_allreduce(rank, world)
    check_rooted(rank, world)
    check_gathers(rank, world, dtypes=(torch.float32,))
    check_p2p(rank, world)  # sends and receives do not count: the next collective still agrees
    dist.barrier()
    g = dist.new_group(list(range(1, world)))
    if rank != 0:
        check_allreduce(rank, world, group=g, members=list(range(1, world)))
    dist.barrier()
    # The checker's purpose: ranks calling different collectives are told so, not hung.
    try:
        if rank == 0:
            dist.broadcast(on(torch.zeros(4)), 0)
        else:
            dist.all_reduce(on(torch.zeros(4)))
        raise AssertionError("mismatched collectives passed the checker")
    except RuntimeError as e:
        if "mismatch" not in str(e).lower():
            raise
        print("mismatch caught:", str(e).splitlines()[0][:120])
    dist.destroy_process_group()
    print("detail ok")


def use_cuda(rank):
    """Puts the checks' tensors on this rank's GPU (ranks share one when there is one)."""
    global DEV
    DEV = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(DEV)
    if rank == 0:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "-"
        print(f"versions: device {torch.cuda.get_device_name(DEV)}, torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}, torch's NCCL {nccl}", flush=True)


def collectives_cuda():
    """Every collective of the backend on CUDA tensors, as collectives() runs them on CPU."""
    rank, world = init()
    use_cuda(rank)
    check_allreduce(rank, world)
    check_rooted(rank, world)
    check_gathers(rank, world, dtypes=(torch.float32, torch.bfloat16, torch.float16, torch.int64))
    check_alltoall(rank, world)
    check_p2p(rank, world)
    # Inputs written by kernels still queued on a stream the caller made current: the
    # collective must wait for them (a sleep kernel keeps that stream busy first).
    n = (1 << 22) + 3  # 16 MiB and odd: several segments of every pipeline
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.full((n,), float(rank + 1), device=DEV)
        torch.cuda._sleep(100_000_000)
        t.mul_(2)
        dist.all_reduce(t)
        t.add_(1)  # ordered after the result, on the same stream
    side.synchronize()
    close(t, torch.full((n,), world * (world + 1) + 1.0), "all_reduce after queued kernels")
    # Out of place, with the result read through the future.
    ins = [data(1400 + r, 1001, torch.float32) for r in range(world)]
    w = dist.all_reduce(on(ins[rank]), async_op=True)
    close(w.get_future().wait()[0], reduce_ref(ins, "sum"), "all_reduce future")
    dist.barrier()
    dist.destroy_process_group()
    print("cuda collectives ok")


def cuda_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10)).to(DEV)


def cuda_steps(net, rank, steps, opt):
    g = torch.Generator().manual_seed(1000 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(64, 32, generator=g).to(DEV)
        y = torch.randint(0, 10, (64,), generator=g).to(DEV)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def ddp_cuda():
    """DDP on a CUDA model for 20 steps over ARGS[0] ("strata" or "nccl"); rank 0 saves
    the parameters to ARGS[1]."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    backend, save = sys.argv[6], sys.argv[7]
    if backend == "strata":
        rank, world = init()
    else:
        rank, world = init(backend)
    use_cuda(rank)
    net = DDP(cuda_model(), device_ids=[DEV.index] if DEV.type == "cuda" else None)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    losses = cuda_steps(net, rank, 20, opt)
    if rank == 0:
        torch.save({k: v.cpu() for k, v in net.module.state_dict().items()}, save)
    dist.barrier()
    dist.destroy_process_group()
    print(f"cuda ddp ok: {backend} loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def hook_cuda():
    """The compressing comm hook on CUDA gradients: residuals kept, every rank's
    parameters the same bits, the loss finite."""
    import strata.torch as st
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init()
    use_cuda(rank)
    net = DDP(cuda_model(), device_ids=[DEV.index] if DEV.type == "cuda" else None)
    state = st.CompressionState("topk:0.01+int8", momentum=0.9)
    net.register_comm_hook(state, st.compress_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.0)
    losses = cuda_steps(net, rank, 20, opt)
    if not all(map(lambda v: v == v and abs(v) < 1e6, losses)):
        raise AssertionError(f"losses {losses}")
    if not state.state_dict()["residuals"]:
        raise AssertionError("no residuals after 20 compressed steps")
    for name, p in net.module.named_parameters():
        theirs = p.detach().clone()
        dist.broadcast(theirs, src=0)
        if not torch.equal(theirs, p.detach()):
            raise AssertionError(f"{name} differs from rank 0's")
    sent = st.backend_of(device="cuda").traffic()["wan_bytes_sent"]
    dist.destroy_process_group()
    print(f"cuda hook ok: loss {losses[0]:.4f} -> {losses[-1]:.4f}, {sent} B sent across regions")


def mismatch():
    rank, world = init(timeout_s=30)
    t = torch.ones(1000)
    start = time.monotonic()
    try:
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
    except Exception as e:  # noqa: BLE001
        print(f"raised {type(e).__name__} after {time.monotonic() - start:.2f} s: {e}")
        os._exit(0)
    raise AssertionError("a mismatched collective did not raise")


def killed():
    rank, world = init(timeout_s=60)
    t = torch.ones(100_000)
    for step in range(1000):
        if rank == world - 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            t.fill_(1)
        except Exception as e:  # noqa: BLE001
            print(f"step {step}: raised {type(e).__name__} after {time.monotonic() - start:.2f} s: {e}")
            os._exit(0)
    raise AssertionError("no error after a rank was killed")


def timeout(which):
    """A peer never joins: the group's 3 s timeout, or a call's own 2 s one (c10d options)
    winning over the group's 60 s, ends the allreduce."""
    import strata.torch as st

    rank, world = init(timeout_s=3 if which == "group" else 60)
    if rank == 1:
        time.sleep(12)  # never joins the allreduce in time
        os._exit(0)
    start = time.monotonic()
    try:
        if which == "group":
            dist.all_reduce(torch.ones(10))
        else:
            opts = dist.AllreduceOptions()
            opts.timeout = datetime.timedelta(seconds=2)
            st.backend_of().allreduce([torch.ones(10)], opts).wait()
    except Exception as e:  # noqa: BLE001
        print(f"raised {type(e).__name__} after {time.monotonic() - start:.2f} s: {e}")
        os._exit(0)
    raise AssertionError("allreduce with an absent peer did not time out")


def group_timeout():
    timeout("group")


def call_timeout():
    timeout("call")


def init_methods():
    """Run with init file://, tcp:// or env://; or under torchrun (init 'torchrun')."""
    method = sys.argv[4]
    if method == "torchrun":
        dist.init_process_group("strata")
    else:
        init()
    t = torch.full((4,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    w = dist.get_world_size()
    close(t, torch.full((4,), w * (w + 1) / 2), "all_reduce")
    dist.destroy_process_group()
    print("init ok")


def hook_state():
    """The compression state's residuals survive a checkpoint round trip."""
    import io

    import strata.torch as st
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init()
    torch.manual_seed(0)
    net = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    state = st.CompressionState("topk:0.05+int8", momentum=0.9)
    net.register_comm_hook(state, st.compress_hook)
    g = torch.Generator().manual_seed(rank)
    for _ in range(5):
        net(torch.randn(8, 16, generator=g)).square().sum().backward()
    sd = state.state_dict()
    if not sd["residuals"] or sd["steps"] != 5:
        raise AssertionError(f"state after 5 steps: {len(sd['residuals'])} bytes, {sd['steps']} steps")
    buf = io.BytesIO()
    torch.save(sd, buf)  # what a checkpoint does
    st.backend_of().reset_residuals()
    if st.backend_of().save_residuals() == sd["residuals"]:
        raise AssertionError("reset_residuals changed nothing")
    fresh = st.CompressionState("topk:0.05+int8")
    fresh.load_state_dict(torch.load(io.BytesIO(buf.getvalue())))
    if st.backend_of().save_residuals() != sd["residuals"] or fresh.steps != 5:
        raise AssertionError("restored residuals differ from the saved ones")
    if fresh.momentum != 0.9 or not sd["velocity"] or any(
            not torch.equal(fresh._velocity[k], v) for k, v in sd["velocity"].items()):
        raise AssertionError("restored velocities differ from the saved ones")
    try:
        st.CompressionState("int8").load_state_dict(sd)
        raise AssertionError("a checkpoint of another compression was accepted")
    except ValueError as e:
        print("refused as expected:", e)
    try:
        fresh.load_state_dict(sd | {"residuals": b"not a snapshot"})
        raise AssertionError("garbage residuals were accepted")
    except ValueError as e:
        print("refused as expected:", e)
    # Pickling the state object (torch.save(state)) takes the same path.
    clone = torch.load(io.BytesIO(_saved(state)), weights_only=False)
    if clone.spec != state.spec or clone.steps != state.steps or clone.momentum != 0.9 or clone._pending != sd["residuals"]:
        raise AssertionError("unpickled state differs")
    # A fresh DDP taking the unpickled state trains on with it.
    net2 = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    net2.register_comm_hook(clone, st.compress_hook)
    net2(torch.randn(8, 16, generator=g)).square().sum().backward()
    if clone.steps != 6 or "_pending" in clone.__dict__:
        raise AssertionError("the unpickled state did not resume")
    dist.destroy_process_group()
    print("hook state ok")


def _saved(obj):
    import io
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


SCENARIOS = {f.__name__: f for f in (collectives, debug_detail, collectives_cuda, ddp_cuda, hook_cuda, mismatch, killed, group_timeout,
                                      call_timeout, init_methods, hook_state)}

if __name__ == "__main__":
    if sys.argv[1] == "torchrun":  # torchrun passes no rank arguments
        sys.argv = [sys.argv[0], "init_methods", "0", "0", "torchrun", ""]
    SCENARIOS[sys.argv[1]]()
