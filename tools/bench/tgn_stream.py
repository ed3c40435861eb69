#!/usr/bin/env python3
"""A synthetic interaction stream for TGN throughput runs, as a KONECT text file.

    tgn_stream.py OUT.txt [--events 10000000] [--nodes 1000000] [--seed 0]

Sources are drawn with Zipf-like activity (a few very active nodes, a long tail), and half of
the events repeat one of the source's earlier partners, so the stream has the recurrence real
interaction data has; timestamps increase by exponential gaps. Lines: "src dst 1 time", ids from 1.
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n, e = a.nodes, a.events
    weights = 1.0 / np.arange(1, n + 1) ** 0.8
    weights /= weights.sum()
    perm = rng.permutation(n)  # activity is not tied to the id
    src = perm[rng.choice(n, size=e, p=weights)]
    dst = rng.integers(0, n, size=e)
    # Repeats: an event copies the destination of an earlier event of the same source.
    order = np.argsort(src, kind="stable")
    s_sorted = src[order]
    same = np.r_[False, s_sorted[1:] == s_sorted[:-1]]
    repeat = same & (rng.random(e) < 0.5)
    d_sorted = dst[order]
    idx = np.arange(e)
    last_start = np.maximum.accumulate(np.where(~same, idx, 0))
    back = last_start + (rng.random(e) * np.maximum(1, idx - last_start)).astype(np.int64)
    d_sorted = np.where(repeat, d_sorted[np.minimum(back, e - 1)], d_sorted)
    dst[order] = d_sorted
    dst = np.where(dst == src, (dst + 1) % n, dst)
    t = np.cumsum(rng.exponential(10.0, size=e)).astype(np.int64)  # seconds, few ties
    with open(a.out, "w") as f:
        f.write("% synthetic interaction stream (tools/bench/tgn_stream.py)\n")
        f.write(f"% {e} {n} {n}\n")
        chunk = 1_000_000
        for b in range(0, e, chunk):
            block = np.column_stack([src[b:b + chunk] + 1, dst[b:b + chunk] + 1, np.ones(min(chunk, e - b), np.int64), t[b:b + chunk]])
            np.savetxt(f, block, fmt="%d")


if __name__ == "__main__":
    main()
