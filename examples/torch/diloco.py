"""A small transformer language model trained across regions: DDP every step, or DiLoCo.

    torchrun --nproc-per-node 4 examples/torch/diloco.py --regions 2 --mode ddp
    torchrun --nproc-per-node 4 examples/torch/diloco.py --regions 2 --mode ddp --compress topk:0.01+int8
    torchrun --nproc-per-node 4 examples/torch/diloco.py --regions 2 --mode diloco --sync-every 50
    torchrun --nproc-per-node 4 examples/torch/diloco.py --regions 2 --mode diloco --compress int4
    torchrun --nproc-per-node 4 examples/torch/diloco.py --regions 2 --mode diloco --compress int4 \\
        --fragments 5 --delay 5                                          # streaming DiLoCo

The text is generated: a language of made-up words whose sentences follow a sparse
random bigram model, learned character by character. Each rank samples its own stream;
the held-out loss is measured on text no rank trains on. --regions 2 puts the first half
of the local ranks in region "east", the rest in "west" (STRATA_REGION); STRATA_WAN_EMULATE
shapes the link between them. With --mode diloco the inner steps run under DDP inside
each region and strata.torch.DiLoCo syncs across regions every --sync-every steps.

Rank 0 prints the loss as it goes and a final line "final: {...}" (JSON: held-out loss,
time per inner step, the share of it blocked on outer allreduces, WAN bytes per inner
step, the loss curve); --json FILE writes it too.
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import strata.torch as st


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", default="diloco", choices=["ddp", "diloco"])
    p.add_argument("--compress", default="none", help="strata compression (none: exact)")
    p.add_argument("--sync-every", type=int, default=50, help="DiLoCo's H")
    p.add_argument("--fragments", type=int, default=1, help="streaming DiLoCo: fragments synced at staggered steps")
    p.add_argument("--delay", type=int, default=0, help="streaming DiLoCo: inner steps each outer sync overlaps")
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--regions", type=int, default=1)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch", type=int, default=16, help="sequences per rank and step")
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="rank 0 writes the final summary here")
    return p.parse_args()


# ---- the text


class Language:
    """Made-up words and a sparse bigram model over them: a text with structure to learn
    at two scales (spelling, word order)."""

    def __init__(self, words=80, successors=4, seed=1234):
        rng = random.Random(seed)
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        self.words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(words)})
        self.next = {w: rng.sample(self.words, successors) for w in self.words}
        self.alphabet = sorted(set(" .".join(self.words) + " ."))
        self.index = {c: i for i, c in enumerate(self.alphabet)}

    def text(self, chars, seed):
        rng = random.Random(seed)
        out, w = [], rng.choice(self.words)
        while sum(map(len, out)) < chars:
            out.append(w + (". " if rng.random() < 0.1 else " "))
            w = rng.choice(self.next[w]) if rng.random() < 0.9 else rng.choice(self.words)
        return torch.tensor([self.index[c] for c in "".join(out)[:chars]], dtype=torch.long)


def batches(tokens, batch, context, seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        start = torch.randint(0, len(tokens) - context - 1, (batch,), generator=g)
        x = torch.stack([tokens[s:s + context] for s in start.tolist()])
        y = torch.stack([tokens[s + 1:s + context + 1] for s in start.tolist()])
        yield x, y


# ---- the model


class TinyGPT(nn.Module):
    def __init__(self, vocab, width, layers, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, x):
        h = self.embed(x) + self.position[: x.shape[1]]
        h = self.blocks(h, mask=self.causal[: x.shape[1], : x.shape[1]], is_causal=True)
        return self.head(h)


def loss_of(model, x, y):
    return nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())


# ---- training


def place_in_region(regions):
    if regions > 1 and "STRATA_REGION" not in os.environ:
        local, local_world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        os.environ["STRATA_REGION"] = f"region{local * regions // local_world}"


def wan_bytes(groups):
    return sum(st.backend_of(g).traffic()["wan_bytes_sent"] for g in groups)


def main():
    args = parse()
    place_in_region(args.regions)
    torch.set_num_threads(1)
    dist.init_process_group("strata")
    rank = dist.get_rank()
    lang = Language()
    train_tokens, held_out = lang.text(200_000, seed=1), lang.text(20_000, seed=2)
    torch.manual_seed(args.seed)
    net = TinyGPT(len(lang.alphabet), args.width, args.layers, args.context)
    diloco, groups = None, [None]
    if args.mode == "ddp":
        model = DDP(net)
        if args.compress != "none":
            model.register_comm_hook(st.CompressionState(args.compress, warmup_steps=0), st.compress_hook)
    else:
        region = st.region_group()
        groups.append(region)
        model = DDP(net, process_group=region)
    inner = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.0)
    if args.mode == "diloco":
        diloco = st.DiLoCo(net, inner, sync_every=args.sync_every, compression=args.compress,
                           fragments=args.fragments, delay=args.delay,
                           outer_optimizer=lambda ps: st.nesterov_sgd(ps, lr=args.outer_lr))
    data = batches(train_tokens, args.batch, args.context, seed=1000 + rank)
    eval_data = list(zip(range(8), batches(held_out, 32, args.context, seed=7)))

    def held_out_loss():
        with torch.no_grad():
            weights = diloco.global_params if diloco else None
            if weights:  # DiLoCo's model is the global one; the local parameters drift between syncs
                saved = [p.detach().clone() for p in net.parameters()]
                for p, g in zip(net.parameters(), weights):
                    p.copy_(g)
            value = sum(loss_of(net, x, y).item() for _, (x, y) in eval_data) / len(eval_data)
            if weights:
                for p, s in zip(net.parameters(), saved):
                    p.copy_(s)
            return value

    curve, start_bytes = [], wan_bytes(groups)
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        x, y = next(data)
        loss = loss_of(model, x, y)
        loss.backward()
        inner.step()
        inner.zero_grad()
        if diloco:
            diloco.step()
        if step % args.eval_every == 0 or step == args.steps:
            if diloco and step == args.steps:
                diloco.sync()
            curve.append((step, held_out_loss()))
            if rank == 0:
                print(f"step {step}: train loss {loss.item():.4f}, held-out {curve[-1][1]:.4f}", flush=True)
    elapsed = time.monotonic() - start
    summary = {"mode": args.mode, "compress": args.compress, "sync_every": args.sync_every,
               "fragments": args.fragments, "delay": args.delay, "steps": args.steps,
               "held_out_loss": curve[-1][1], "step_ms": 1000 * elapsed / args.steps,
               "outer_wait_share": diloco.wait_seconds / elapsed if diloco else None,
               "wan_bytes_per_step": (wan_bytes(groups) - start_bytes) / args.steps, "curve": curve,
               "perplexity": math.exp(curve[-1][1])}
    if rank == 0:
        print("final: " + json.dumps(summary), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
