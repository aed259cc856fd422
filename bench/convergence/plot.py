#!/usr/bin/env python3
"""Draws the training-loss curves of strata-convergence's CSV into a PNG.

    plot.py convergence.csv loss.png [--window N]

Standard library only (CI has no matplotlib): the image is rasterised by hand into an
indexed-colour PNG, text uses a built-in 5x7 upper-case font, and the legend with each
run's final loss is also stored in the PNG's tEXt chunk and printed.
"""

import argparse
import csv
import math
import struct
import sys
import zlib
from collections import OrderedDict

WIDTH, HEIGHT = 880, 520
LEFT, RIGHT, TOP, BOTTOM = 90, 24, 56, 64  # plot-area margins, room for tick labels
TAIL = 0.05  # same definition of "final loss" as the C++ summary

# Palette index -> RGB. An indexed image of a few flat colours compresses to a few KB.
PALETTE = [
    (255, 255, 255),  # background
    (0, 0, 0),  # axes and text
    (215, 215, 215),  # grid
    (31, 119, 180),  # run 1: blue
    (230, 110, 0),  # run 2: orange
    (44, 160, 44),  # run 3: green
    (200, 30, 40),  # run 4: red
    (130, 80, 190),  # run 5: purple
]
BG, INK, GRID, FIRST_RUN = 0, 1, 2, 3

# Classic 5x7 font, column-major, bit 0 at the top.
FONT = {
    " ": "0000000000", "%": "2313086462", "(": "001c224100", ")": "0041221c00",
    "+": "08083e0808", ",": "0050300000", "-": "0808080808", ".": "0060600000",
    "/": "2010080402", ":": "0036360000", "=": "1414141414", "_": "4040404040",
    "0": "3e5149453e", "1": "00427f4000", "2": "4261514946", "3": "2141454b31",
    "4": "1814127f10", "5": "2745454539", "6": "3c4a494930", "7": "0171090503",
    "8": "3649494936", "9": "064949291e", "A": "7e1111117e", "B": "7f49494936",
    "C": "3e41414122", "D": "7f4141221c", "E": "7f49494941", "F": "7f09090101",
    "G": "3e41415132", "H": "7f0808087f", "I": "00417f4100", "J": "2040413f01",
    "K": "7f08142241", "L": "7f40404040", "M": "7f0204027f", "N": "7f0408107f",
    "O": "3e4141413e", "P": "7f09090906", "Q": "3e4151215e", "R": "7f09192946",
    "S": "4649494931", "T": "01017f0101", "U": "3f4040403f", "V": "1f2040201f",
    "W": "7f2018207f", "X": "6314081463", "Y": "0304780403", "Z": "6151494543",
}


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray([BG]) * (w * h)

    def set(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            self.px[y * self.w + x] = c

    def rect(self, x0, y0, x1, y1, c):
        for y in range(max(y0, 0), min(y1, self.h)):
            self.px[y * self.w + max(x0, 0):y * self.w + min(x1, self.w)] = bytes([c]) * max(0, min(x1, self.w) - max(x0, 0))

    def line(self, x0, y0, x1, y1, c, thick=1, clip=None):
        # Bresenham; a square brush gives thickness. clip = (x0, y0, x1, y1) keeps curves
        # that leave the y range from drawing over the axes.
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for ox in range(thick):
                for oy in range(thick):
                    x, y = x0 + ox, y0 + oy
                    if clip is None or (clip[0] <= x < clip[2] and clip[1] <= y < clip[3]):
                        self.set(x, y, c)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, c=INK, scale=2):
        for ch in s.upper():
            cols = FONT.get(ch, FONT[" "])
            for i in range(5):
                bits = int(cols[2 * i:2 * i + 2], 16)
                for row in range(7):
                    if bits >> row & 1:
                        self.rect(x + i * scale, y + row * scale, x + (i + 1) * scale, y + (row + 1) * scale, c)
            x += 6 * scale

    def png(self, texts):
        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        rows = b"".join(b"\0" + bytes(self.px[y * self.w:(y + 1) * self.w]) for y in range(self.h))
        out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 3, 0, 0, 0))
        out += chunk(b"PLTE", b"".join(bytes(rgb) for rgb in PALETTE))
        for key, value in texts:
            out += chunk(b"tEXt", key.encode("latin-1") + b"\0" + value.encode("latin-1", "replace"))
        return out + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def text_width(s, scale=2):
    return 6 * scale * len(s) - scale


def nice_step(span, target_ticks):
    raw = span / max(target_ticks, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def ticks(lo, hi, target, min_step=0.0):
    step = max(nice_step(hi - lo, target), min_step)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9 * step:
        out.append(v)
        v += step
    return out, step


def label(v, step):
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if step < 1 and abs(step * 10 ** decimals - round(step * 10 ** decimals)) > 1e-6:
        decimals += 1
    return f"{v:.{decimals}f}"


def moving_average(ys, window):
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def read_runs(path):
    runs = OrderedDict()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            runs.setdefault(row["run"], []).append((int(row["step"]), float(row["train_loss"])))
    if not runs:
        raise SystemExit(f"{path}: no rows")
    return runs


def final_loss(points):
    k = max(1, int(len(points) * TAIL))
    return sum(y for _, y in points[-k:]) / k


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--window", type=int, default=0, help="moving-average steps (default: 2%% of the run)")
    ap.add_argument("--title", default="", help="a first line above the plot")
    a = ap.parse_args()

    runs = read_runs(a.csv)
    steps = max(len(p) for p in runs.values())
    window = a.window or max(1, steps // 50)
    curves = OrderedDict((name, (([x for x, _ in p]), moving_average([y for _, y in p], window))) for name, p in runs.items())

    # Linear y axis from the data, but a run that blows up must not flatten the others:
    # the top is capped at 1.5x the baseline's starting loss and such curves are clipped.
    base = next(iter(curves.values()))[1]
    all_y = [y for _, ys in curves.values() for y in ys]
    y_hi = min(max(all_y), 1.5 * max(base[: max(1, window)]))
    y_lo = min(all_y)
    pad = 0.04 * (y_hi - y_lo or 1)
    y_lo, y_hi = y_lo - pad, y_hi + pad
    x_lo, x_hi = 0, max(max(xs) for xs, _ in curves.values()) or 1

    c = Canvas(WIDTH, HEIGHT)
    px0, py0, px1, py1 = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM

    def to_px(x, y):
        return (round(px0 + (x - x_lo) / (x_hi - x_lo) * (px1 - px0 - 1)),
                round(py1 - 1 - (y - y_lo) / (y_hi - y_lo) * (py1 - py0 - 1)))

    yt, ystep = ticks(y_lo, y_hi, 6)
    for v in yt:
        _, y = to_px(x_lo, v)
        c.rect(px0, y, px1, y + 1, GRID)
        c.rect(px0 - 6, y, px0, y + 1, INK)
        s = label(v, ystep)
        c.text(px0 - 10 - text_width(s), y - 7, s)
    xt, xstep = ticks(x_lo, x_hi, 8, min_step=1)  # steps are whole numbers
    for v in xt:
        x, _ = to_px(v, y_lo)
        c.rect(x, py0, x + 1, py1, GRID)
        c.rect(x, py1, x + 1, py1 + 6, INK)
        s = label(v, xstep)
        c.text(x - text_width(s) // 2, py1 + 12, s)
    c.rect(px0, py0, px1, py0 + 1, INK)
    c.rect(px0, py1 - 1, px1, py1, INK)
    c.rect(px0, py0, px0 + 1, py1, INK)
    c.rect(px1 - 1, py0, px1, py1, INK)
    c.text(px1 - text_width("STEP"), py1 + 36, "STEP")
    if a.title:
        c.text(px0, 8, a.title)
    c.text(px0, 30 if a.title else 16, f"TRAINING LOSS, MOVING AVERAGE OF {window} STEPS")

    legend = []
    baseline = final_loss(next(iter(runs.values())))
    for i, (name, (xs, ys)) in enumerate(curves.items()):
        colour = FIRST_RUN + i % (len(PALETTE) - FIRST_RUN)
        pts = [to_px(x, y) for x, y in zip(xs, ys)]
        for (xa, ya), (xb, yb) in zip(pts, pts[1:] or pts):  # a lone point still shows
            c.line(xa, ya, xb, yb, colour, thick=2, clip=(px0 + 1, py0 + 1, px1 - 1, py1 - 1))
        fl = final_loss(runs[name])
        legend.append((name, colour, fl, fl / baseline if baseline else float("nan")))

    # Legend box in the top-right corner, where loss curves (falling) leave room.
    # The font is monospaced, so padding aligns the columns.
    names = [n.replace("_", " ") for n, _, _, _ in legend]
    pad = max(len(n) for n in names + ["RUN"]) + 2
    head = "RUN".ljust(pad) + "FINAL LOSS  RATIO"
    rows = [n.ljust(pad) + f"{fl:<10.4f}  {r:.3f}" for n, (_, _, fl, r) in zip(names, legend)]
    box_w = 44 + 8 + max(text_width(s) for s in rows)
    box_w = max(box_w, 44 + text_width(head) + 8)
    box_h = 12 + 22 * (len(rows) + 1)
    bx, by = px1 - box_w - 12, py0 + 12
    c.rect(bx, by, bx + box_w, by + box_h, BG)
    c.line(bx, by, bx + box_w, by, INK)
    c.line(bx, by + box_h, bx + box_w, by + box_h, INK)
    c.line(bx, by, bx, by + box_h, INK)
    c.line(bx + box_w, by, bx + box_w, by + box_h, INK)
    c.text(bx + 44, by + 8, head)
    for i, ((_, colour, _, _), s) in enumerate(zip(legend, rows)):
        y = by + 8 + 22 * (i + 1)
        c.rect(bx + 8, y + 4, bx + 32, y + 10, colour)
        c.text(bx + 44, y, s)

    colour_names = ["blue", "orange", "green", "red", "purple"]
    text = "; ".join(
        f"{n} ({colour_names[(col - FIRST_RUN) % len(colour_names)]}): final loss {fl:.5f}, ratio {r:.4f}"
        for n, col, fl, r in legend)
    with open(a.png, "wb") as f:
        f.write(c.png([("Title", a.title or "strata-convergence training loss"), ("Description", text)]))
    print(f"{a.png}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
