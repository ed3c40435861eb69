#!/usr/bin/env python3
"""GPU baseline for tools/gpu-check.sh: PyTorch Geometric's GCNConv, full batch, on a halo
native dataset read with NumPy (docs/FORMATS.md: 64-byte header, then the raw payload).

    python3 tools/bench/pyg_gcn.py DATASET [--epochs 10] [--hidden 256] [--layers 3] [--adj csr|edge_index]

The model matches `halo train --device cuda --layers 3 --hidden 256 --dropout 0.5`: GCNConv
(normalised A + I, cached) -> ReLU -> dropout 0.5 between layers, cross-entropy over the train
split, Adam 0.01. Each epoch (zero_grad, forward, backward, step) is timed after
torch.cuda.synchronize(). Prints one JSON line: median epoch seconds and peak GPU memory
(torch.cuda.max_memory_allocated, the allocator's view, like halo's own count).

The adjacency goes to GCNConv as a torch.sparse_csr_tensor by default, normalised once with
PyG's own gcn_norm before the timed epochs (and before the peak-memory count starts, as halo
builds its operator on the host), and every layer aggregates with torch.sparse.mm (cuSPARSE):
PyG's memory-lean full-batch route, which needs neither torch_sparse nor torch_scatter. `--adj edge_index` is PyG's message-passing route,
which materialises one message per edge and layer ([E, hidden] floats: about 129 GB per layer
at products size, more than an H200 holds); when the GPU runs out of memory the JSON line says
so ("oom": true) with the peak reached, and any other failure gives an "error" line, instead
of a traceback.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

HEADER = 64
DTYPES = {1: np.int8, 2: np.int32, 3: np.int64, 4: np.float32, 5: np.float64}


def load(ds, meta, name):
    info = meta["arrays"][name]
    path = os.path.join(ds, info["file"])
    with open(path, "rb") as f:
        head = f.read(HEADER)
    if head[:8] != b"HALOARR1":
        sys.exit(f"{path}: not a halo array file")
    dtype = DTYPES[int.from_bytes(head[12:16], "little")]
    rows = int.from_bytes(head[16:24], "little")
    cols = int.from_bytes(head[24:32], "little")
    a = np.fromfile(path, dtype=dtype, count=rows * cols, offset=HEADER)
    return a.reshape(rows, cols) if cols > 1 else a


class Net(torch.nn.Module):
    def __init__(self, fin, hidden, fout, layers, dropout, normalize):
        super().__init__()
        dims = [fin] + [hidden] * (layers - 1) + [fout]
        self.convs = torch.nn.ModuleList(GCNConv(a, b, cached=True, normalize=normalize)
                                         for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i + 1 < len(self.convs):
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--adj", choices=["csr", "edge_index"], default="csr")
    a = p.parse_args()
    meta = json.load(open(os.path.join(a.dataset, "meta.json")))
    offsets = load(a.dataset, meta, "offsets").astype(np.int64)
    indices = load(a.dataset, meta, "indices").astype(np.int64)
    n = offsets.shape[0] - 1
    dev = torch.device("cuda")
    if a.adj == "csr":
        # Row i lists i's neighbours: adj_t (target x source) of a symmetric graph.
        adj = torch.sparse_csr_tensor(torch.from_numpy(offsets), torch.from_numpy(indices),
                                      torch.ones(indices.shape[0], dtype=torch.float32), size=(n, n)).to(dev)
        adj, _ = gcn_norm(adj, None, n, add_self_loops=True)  # D^-1/2 (A + I) D^-1/2, one copy
    else:
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
        adj = torch.from_numpy(np.stack([indices, row])).to(dev)  # source -> target
    x = torch.from_numpy(load(a.dataset, meta, "features")).to(dev)
    y = torch.from_numpy(load(a.dataset, meta, "labels").reshape(-1).astype(np.int64)).to(dev)
    split = next(iter(meta["splits"]))
    train = torch.from_numpy(load(a.dataset, meta, f"split.{split}.train").astype(np.int64)).to(dev)
    train = train[y[train] >= 0]
    classes = int(meta["labels"]["classes"])
    torch.manual_seed(0)
    model = Net(x.shape[1], a.hidden, classes, a.layers, a.dropout, normalize=a.adj != "csr").to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    import torch_geometric
    info = {"adj": a.adj, "torch": torch.__version__, "pyg": torch_geometric.__version__,
            "gpu": torch.cuda.get_device_name()}
    times = []
    try:
        for epoch in range(a.epochs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.train()
            opt.zero_grad()
            loss = F.cross_entropy(model(x, adj)[train], y[train])
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            print(f"epoch {epoch + 1} loss {loss.item():.4f} {times[-1]:.4f} s", file=sys.stderr)
    except torch.cuda.OutOfMemoryError as e:
        print(f"out of GPU memory in epoch {len(times) + 1}: {e}", file=sys.stderr)
        print(json.dumps({"oom": True, "epochs_done": len(times),
                          "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20, **info}))
        sys.exit(3)
    print(json.dumps({"epoch_time_median_s": statistics.median(times[1:] if len(times) > 1 else times),
                      "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20,
                      "peak_gpu_reserved_mb": torch.cuda.max_memory_reserved() / 2**20, **info}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - one JSON line for the check, whatever broke
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:500]}))
        raise
