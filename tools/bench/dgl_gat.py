#!/usr/bin/env python3
"""Peer for the GAT benchmark (tools/bench/gat.sh): DGL's GATConv, full batch, on the CPU.

    /tmp/dglvenv/bin/python tools/bench/dgl_gat.py DATASET --epochs N --threads T
                     [--layers 3] [--heads 3] [--hidden 250] [--dropout 0.5] [--attn-dropout 0]
                     [--lr 0.005] [--split NAME] [--seed S]

DGL 2.1 from PyPI (the newest Linux wheel) with torch 2.2.1, numpy < 2, torchdata 0.7.1
(--no-deps), pandas, pyyaml, pydantic. DATASET is a halo native dataset (read with
tools/bench/native.py). The model is `halo train --preset ogbn-arxiv-gat`'s, as DGL's own
ogbn-arxiv GAT example builds it (without its batch norm): GATConv(in, hidden, heads,
residual=True) -> flatten heads -> ELU -> dropout, for every hidden layer, then GATConv(.., C,
heads, residual=True) averaged over heads; the graph with a self-loop per node; cross-entropy
over the train split; Adam. Each epoch (zero_grad, forward, backward, step) is timed with
time.perf_counter. Prints one JSON line: median epoch seconds, peak RSS, final loss.
"""

import argparse
import json
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset")
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--hidden", type=int, default=250)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--attn-dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--split", default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.epochs < 1 or a.threads < 1 or a.layers < 1:
        p.error("--epochs, --threads and --layers must be >= 1")
    return a


ARGS = parse_args()
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)  # before torch and DGL load OpenMP

import resource  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import dgl  # noqa: E402
from dgl.nn import GATConv  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import native  # noqa: E402


def fail(msg):
    print(f"dgl_gat: {msg}", file=sys.stderr)
    sys.exit(1)


class Gat(torch.nn.Module):
    def __init__(self, in_feats, classes):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        width = in_feats
        for i in range(ARGS.layers):
            last = i + 1 == ARGS.layers
            out = classes if last else ARGS.hidden
            self.convs.append(GATConv(width, out, ARGS.heads, attn_drop=ARGS.attn_dropout,
                                      residual=True, allow_zero_in_degree=True))
            width = out * ARGS.heads

    def forward(self, g, x):
        h = x
        for i, conv in enumerate(self.convs):
            h = conv(g, h)
            if i + 1 == len(self.convs):
                return h.mean(1)
            h = F.elu(h.flatten(1))
            h = F.dropout(h, p=ARGS.dropout, training=self.training)
        return h


def main():
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(ARGS.seed)
    ds = ARGS.dataset
    try:
        meta = native.read_meta(ds)
        splits = meta.get("splits", {})
        split = ARGS.split or ("public" if "public" in splits else sorted(splits)[0])
        offsets = native.load_array(ds, meta, "offsets")
        indices = native.load_array(ds, meta, "indices")
        x = torch.from_numpy(native.load_array(ds, meta, "features"))
        labels = torch.from_numpy(native.load_array(ds, meta, "labels").astype(np.int64))
        train = torch.from_numpy(native.load_array(ds, meta, f"split.{split}.train")
                                 .astype(np.int64))
    except (native.DatasetError, IndexError) as e:
        fail(str(e))
    n = int(meta["nodes"])
    labels = labels.reshape(-1)
    train = train[labels[train] >= 0]
    # Row u lists u's neighbours: messages flow neighbour -> u (the graph is symmetric).
    dst = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets)))
    src = torch.from_numpy(indices.astype(np.int64))
    g = dgl.add_self_loop(dgl.graph((src, dst), num_nodes=n))
    g.create_formats_()  # every sparse layout the kernels use, built once before the timed epochs
    del offsets, indices, src, dst
    model = Gat(x.shape[1], int(meta["labels"]["classes"]))
    opt = torch.optim.Adam(model.parameters(), lr=ARGS.lr)
    model.train()
    times, loss_value = [], float("nan")
    for epoch in range(1, ARGS.epochs + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(g, x)
        loss = F.cross_entropy(out[train], labels[train])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        loss_value = loss.item()
        print(f"epoch {epoch}: loss {loss_value:.4f}, {times[-1]:.3f} s", file=sys.stderr)
    print(json.dumps({
        "epoch_time_median_s": statistics.median(times),
        "epoch_times_s": times,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "final_loss": loss_value,
        "dgl_version": dgl.__version__,
        "torch_version": torch.__version__,
        "threads": ARGS.threads,
    }))


if __name__ == "__main__":
    main()
