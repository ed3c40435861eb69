#!/usr/bin/env python3
"""Peer for the headline benchmark (tools/bench/headline.sh): the 3-layer full-batch GCN of
`halo train --preset ogbn-arxiv-gcn` in DGL or PyTorch Geometric, on the CPU.

    /tmp/dglvenv/bin/python tools/bench/peer_gcn.py DATASET --framework dgl|pyg --epochs N
                     --threads T [--hidden 256] [--dropout 0.5] [--lr 0.01] [--split NAME]
                     [--seed S] [--pyg-adj csr|edge_index]

PyPI only: python3 -m venv /tmp/dglvenv && /tmp/dglvenv/bin/pip install torch==2.2.1 "numpy<2"
dgl==2.1.0 pandas pyyaml pydantic torch-geometric && /tmp/dglvenv/bin/pip install --no-deps
torchdata==0.7.1. DATASET is a halo native dataset (read with tools/bench/native.py, as
train_torch.py and dgl_gat.py do); unweighted graphs only (the preset's A_hat counts edges).

The model is train_torch.py's, with the framework's own convolution: F -> 256 -> 256 -> C, each
hidden layer conv -> BatchNorm1d -> ReLU -> dropout 0.5, the last layer a conv only; cross-entropy
(log_softmax + NLL) over the labelled train nodes; Adam, lr 0.01, no weight decay. The conv
computes D^-1/2 (A + I) D^-1/2 X W + b:
  dgl  GraphConv(norm='both') on the graph with a self loop added per node;
  pyg  GCNConv(cached=True, normalize=True), given by default the adjacency as a torch CSR
       tensor (adj_t, PyG's memory-efficient full-batch route: torch.sparse.mm);
       --pyg-adj edge_index gives it the edge list instead (message passing: one message per
       edge and layer, [E, 256] floats).
PyG normalises A + I in the first forward (cached afterwards): the first epoch includes it, as
DGL's first epoch includes building its sparse formats; pass EPOCHS >= 3 so that the median
epoch does not.

Each epoch (zero_grad, forward, backward, step; training mode) is timed with time.perf_counter.
Prints one JSON line on stdout: median epoch seconds, every epoch's seconds, peak RSS
(ru_maxrss), the final loss, the versions; progress goes to stderr. Bad arguments or a bad
dataset end the run with one line and exit status 2 (arguments) or 1 (dataset).
"""

import argparse
import json
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset", help="halo native dataset directory")
    p.add_argument("--framework", choices=["dgl", "pyg"], required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--split", default=None, help="split name (default: public, else the first)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pyg-adj", choices=["csr", "edge_index"], default="csr",
                   help="how GCNConv gets the graph (pyg only)")
    a = p.parse_args()
    if a.epochs < 1 or a.threads < 1 or a.hidden < 1:
        p.error("--epochs, --threads and --hidden must be >= 1")
    if not 0.0 <= a.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    return a


ARGS = parse_args()
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)  # before torch (and DGL) load OpenMP
os.environ.setdefault("DGLBACKEND", "pytorch")  # DGL otherwise prints a notice on first use

import resource  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# torch 2.2 warns once that sparse CSR support is "beta"; torch.sparse.mm on CSR is what PyG uses.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import native  # noqa: E402  (tools/bench/native.py: the native dataset reader)


def fail(msg):
    print(f"peer_gcn: {msg}", file=sys.stderr)
    sys.exit(1)


def load_dataset(ds):
    """(meta, offsets, indices, features, labels, train ids); a bad dataset ends the run."""
    try:
        meta = native.read_meta(ds)
        if meta.get("kind", "graph") != "graph":
            fail(f"{ds}: kind '{meta.get('kind')}' is not supported (graph datasets only)")
        if meta.get("edge_weights"):
            fail(f"{ds}: edge weights are not supported (the preset's GCN counts edges)")
        labels_info = meta.get("labels", {})
        if labels_info.get("kind") != "multiclass" or labels_info.get("columns", 1) != 1:
            fail(f"{ds}: only multiclass labels (1 column) are supported")
        splits = meta.get("splits", {})
        if not splits:
            fail(f"{ds}: dataset has no splits")
        split = ARGS.split or ("public" if "public" in splits else sorted(splits)[0])
        if split not in splits:
            fail(f"{ds}: no split '{split}' (have: {', '.join(sorted(splits))})")
        offsets = native.load_array(ds, meta, "offsets").astype(np.int64)
        indices = native.load_array(ds, meta, "indices").astype(np.int64)
        x = native.load_array(ds, meta, "features")
        labels = native.load_array(ds, meta, "labels").astype(np.int64).reshape(-1)
        train = native.load_array(ds, meta, f"split.{split}.train").astype(np.int64)
    except (native.DatasetError, KeyError) as e:
        fail(f"{ds}: {e}")
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    train = train[labels[train] >= 0]  # -1 = missing label
    if train.size == 0:
        fail(f"{ds}: split '{split}' has no labelled train nodes")
    return meta, offsets, indices, x, labels, train


class Gcn(torch.nn.Module):
    """convs[i] -> BatchNorm1d -> ReLU -> dropout for the hidden layers; the last conv alone."""

    def __init__(self, convs, hidden):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(hidden)
                                         for _ in range(len(convs) - 1))

    def forward(self, graph, x):
        h = x
        for i, conv in enumerate(self.convs):
            h = conv(graph, h)
            if i + 1 < len(self.convs):
                h = F.dropout(F.relu(self.norms[i](h)), p=ARGS.dropout, training=self.training)
        return h


def build(meta, offsets, indices, x, classes):
    """(model, graph argument, framework version) for ARGS.framework."""
    n = int(meta["nodes"])
    dims = [x.shape[1], ARGS.hidden, ARGS.hidden, classes]
    if ARGS.framework == "dgl":
        import dgl
        from dgl.nn import GraphConv

        # Row u lists u's neighbours: messages flow neighbour -> u (the graph is symmetric).
        dst = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets)))
        g = dgl.add_self_loop(dgl.graph((torch.from_numpy(indices), dst), num_nodes=n))
        g.create_formats_()  # every sparse layout the kernels use, built before the timed epochs
        convs = [GraphConv(a, b, norm="both") for a, b in zip(dims[:-1], dims[1:])]
        return Gcn(convs, ARGS.hidden), g, dgl.__version__

    import torch_geometric
    from torch_geometric.nn import GCNConv

    class Conv(torch.nn.Module):  # GCNConv takes (x, graph); Gcn calls conv(graph, x)
        def __init__(self, a, b):
            super().__init__()
            self.conv = GCNConv(a, b, cached=True, normalize=True)

        def forward(self, graph, h):
            return self.conv(h, graph)

    if ARGS.pyg_adj == "csr":
        # adj_t (target x source): row u lists u's neighbours; GCNConv adds the self loops.
        graph = torch.sparse_csr_tensor(torch.from_numpy(offsets), torch.from_numpy(indices),
                                        torch.ones(indices.shape[0], dtype=torch.float32),
                                        size=(n, n))
    else:
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
        graph = torch.from_numpy(np.stack([indices, row]))  # source -> target
    convs = [Conv(a, b) for a, b in zip(dims[:-1], dims[1:])]
    return Gcn(convs, ARGS.hidden), graph, torch_geometric.__version__


def main():
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(ARGS.seed)
    meta, offsets, indices, x, labels, train = load_dataset(ARGS.dataset)
    model, graph, version = build(meta, offsets, indices, x, int(meta["labels"]["classes"]))
    del offsets, indices
    x = torch.from_numpy(x)
    labels = torch.from_numpy(labels)
    train = torch.from_numpy(train)
    train_labels = labels[train]
    opt = torch.optim.Adam(model.parameters(), lr=ARGS.lr, weight_decay=0.0)
    model.train()
    times, losses = [], []
    for epoch in range(1, ARGS.epochs + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(graph, x)[train], train_labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        print(f"epoch {epoch}: loss {losses[-1]:.4f}, {times[-1]:.3f} s", file=sys.stderr)
    print(json.dumps({
        "framework": ARGS.framework,
        "epoch_time_median_s": statistics.median(times),
        "epoch_times_s": times,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "version": version,
        "torch_version": torch.__version__,
        "threads": ARGS.threads,
        **({"pyg_adj": ARGS.pyg_adj} if ARGS.framework == "pyg" else {}),
    }))


if __name__ == "__main__":
    main()
