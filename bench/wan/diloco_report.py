"""The table and the loss-curve plot of bench/wan/diloco_wan.sh: python diloco_report.py OUT TITLE."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUNS = [("ddp-exact", "DDP exact"), ("ddp-topk", "DDP top-k 1% + int8"), ("diloco-exact", "DiLoCo H=50 exact"),
        ("diloco-int4", "DiLoCo H=50 int4"), ("streaming-int4", "streaming DiLoCo int4"),
        ("streaming-exact", "streaming DiLoCo exact")]


def main():
    out, title = Path(sys.argv[1]), sys.argv[2]
    runs = {name: json.loads((out / f"{name}.json").read_text()) for name, _ in RUNS if (out / f"{name}.json").exists()}
    print(f"## {title}")
    print(f"{'run':24} {'held-out loss':>13} {'ms/step':>8} {'outer wait':>10} {'WAN B/step/rank':>16}")
    for name, label in RUNS:
        if name not in runs:
            continue
        r = runs[name]
        wait = "-" if r["outer_wait_share"] is None else f"{100 * r['outer_wait_share']:.1f}%"
        print(f"{label:24} {r['held_out_loss']:13.4f} {r['step_ms']:8.1f} {wait:>10} {r['wan_bytes_per_step']:16,.0f}")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, label in RUNS:
        if name in runs:
            steps, losses = zip(*runs[name]["curve"])
            ax.plot(steps, losses, label=label)
    ax.set_xlabel("inner step")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=120)
    print(f"plot: {out / 'loss.png'}")


if __name__ == "__main__":
    main()
