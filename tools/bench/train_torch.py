#!/usr/bin/python3
"""Baseline for the training benchmark: a 3-layer full-graph GCN in plain PyTorch.

    /usr/bin/python3 tools/bench/train_torch.py DATASET --epochs N --threads T
                     [--split NAME] [--no-batch-norm] [--sparse-layout csr|coo]
                     [--autograd-backward] [--seed S] [--eval]

Run with Debian's interpreter and Debian's python3-torch (1.13), not a pip/pyenv one:
    apt-get install -y python3-torch libopenblas0-pthread python3-matplotlib python3-numpy

DATASET is a halo native dataset directory (docs/FORMATS.md). The model, the baseline for
`halo train`'s 3-layer GCN: F -> 256 -> 256 -> C (F = 128 for ogbn-arxiv); each hidden layer is
GCN conv (A_hat (X W) + b) -> BatchNorm1d -> ReLU -> dropout 0.5, the last layer is a GCN conv
only; log_softmax + NLL over the labelled nodes of the train split; Adam, lr 0.01, no weight
decay; Glorot-uniform weights, zero biases. A_hat = D^-1/2 (A + I) D^-1/2 (D counts the self
loop; with edge weights, D is the weighted degree + 1).

Each epoch (zero_grad + forward + backward + optimizer step, full batch, training mode) is timed
with time.perf_counter. One JSON line is printed on stdout at the end; progress goes to stderr.

Sparse layout. torch 1.13's torch.sparse.mm accepts both COO and CSR (int32 or int64 indices)
and differentiates with respect to the dense operand for both. Measured on the dev VM (2-core
AMD EPYC, Debian torch 1.13.1 without MKL, 2 threads; 169,343 nodes, 2,427,281 entries in
A + I, a 256-column dense operand), one A_hat @ H forward / backward:
    CSR int32, backward = A_hat @ G (symmetric)     ~0.57 s / ~0.58 s   <- default
    COO,       backward = A_hat @ G (symmetric)     ~0.90 s / ~0.95 s
    CSR,       torch's own sparse.mm backward       ~0.58 s / ~1.5 s
    COO,       torch's own sparse.mm backward       ~0.90 s / ~1.05 s
and a whole epoch (this script, arxiv-sized graph, 5 epochs, median): CSR 6.3 s, COO 8.1 s.
So the default is CSR, which is also smaller (int32 row offsets instead of an int64 row index
per entry). torch's own backward forms A_hat^T on every call (a transpose plus a re-sort of the
2.4M entries); A_hat is symmetric, so the default uses a small autograd.Function whose backward
is A_hat @ grad -- the same arithmetic halo does. --autograd-backward restores torch's own
backward (automatic for datasets marked "directed"); --sparse-layout coo selects COO.
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
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--split", default=None, help="split name (default: public, else the first)")
    p.add_argument("--no-batch-norm", action="store_true")
    p.add_argument("--sparse-layout", choices=["csr", "coo"], default="csr")
    p.add_argument("--autograd-backward", action="store_true",
                   help="use torch's own sparse.mm backward instead of the symmetric A_hat @ grad")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval", action="store_true",
                   help="after training, add train/valid/test accuracy (eval mode, untimed) "
                        "to the JSON line as \"accuracy\"")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()
    if args.epochs < 1:
        p.error("--epochs must be >= 1")
    if args.threads < 1:
        p.error("--threads must be >= 1")
    return args


ARGS = parse_args()
# Must be set before torch (and its OpenMP runtime) is imported.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
os.environ.setdefault("MKL_NUM_THREADS", str(ARGS.threads))

import resource  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# torch 1.13 warns once that sparse CSR support is "beta"; it works for what is used here.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

import native  # noqa: E402  (tools/bench/native.py: the native dataset reader)


def fail(msg):
    print(f"train_torch: {msg}", file=sys.stderr)
    sys.exit(1)


def load_array(ds, meta, name):
    """NAME.bin's payload, checked against meta.json; a bad file ends the run in one line."""
    try:
        return native.load_array(ds, meta, name)
    except native.DatasetError as e:
        fail(str(e))


def build_adjacency(offsets, indices, weights, n, layout):
    """A_hat = D^-1/2 (A + I) D^-1/2 as a torch sparse tensor, the self loop appended to each row."""
    nnz = indices.shape[0]
    deg = np.diff(offsets)                                   # int64 [n]
    row = np.repeat(np.arange(n, dtype=np.int32), deg)       # row of each original entry
    # Row r of A + I occupies [offsets[r] + r, offsets[r+1] + r + 1). Columns must stay sorted
    # (torch 1.13 validates CSR), so the diagonal goes after the entries of row r below r, and
    # the entries above r shift by one more. O(nnz), no sort; indices has no self loops.
    below = indices < row
    new_offsets = offsets + np.arange(n + 1, dtype=np.int64)
    cols = np.empty(nnz + n, dtype=np.int32)
    vals = np.empty(nnz + n, dtype=np.float32)
    orig_pos = np.arange(nnz, dtype=np.int64) + row + ~below
    diag_pos = new_offsets[:-1] + np.bincount(row[below], minlength=n)
    del below
    cols[orig_pos] = indices
    cols[diag_pos] = np.arange(n, dtype=np.int32)
    if weights is None:
        wdeg = deg.astype(np.float64) + 1.0
    else:
        wdeg = np.bincount(row, weights=weights, minlength=n).astype(np.float64) + 1.0
    dinv = (1.0 / np.sqrt(wdeg)).astype(np.float32)
    v = dinv[row] * dinv[indices]
    if weights is not None:
        v *= weights
    vals[orig_pos] = v
    vals[diag_pos] = dinv * dinv
    del row, orig_pos, diag_pos, v
    if layout == "csr":
        return torch.sparse_csr_tensor(torch.from_numpy(new_offsets.astype(np.int32)
                                                        if nnz + n < 2**31 else new_offsets),
                                       torch.from_numpy(cols), torch.from_numpy(vals),
                                       size=(n, n))
    full_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(new_offsets))
    idx = torch.from_numpy(np.stack([full_rows, cols.astype(np.int64)]))
    # Entries are already sorted and unique; coalesce() only marks them so (one sort, untimed).
    return torch.sparse_coo_tensor(idx, torch.from_numpy(vals), (n, n)).coalesce()


class SymSpMM(torch.autograd.Function):
    """Y = A_hat @ X for a symmetric A_hat; dX = A_hat @ dY (A_hat^T = A_hat)."""

    @staticmethod
    def forward(ctx, adj, x):
        ctx.adj = adj
        return torch.sparse.mm(adj, x)

    @staticmethod
    def backward(ctx, grad):
        return None, torch.sparse.mm(ctx.adj, grad.contiguous())


class GCN(torch.nn.Module):
    def __init__(self, dims, batch_norm, dropout, autograd_backward):
        super().__init__()
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        self.norms = torch.nn.ModuleList()
        for i in range(len(dims) - 1):
            w = torch.nn.Parameter(torch.empty(dims[i], dims[i + 1]))
            torch.nn.init.xavier_uniform_(w)                  # Glorot
            self.weights.append(w)
            self.biases.append(torch.nn.Parameter(torch.zeros(dims[i + 1])))
            if batch_norm and i < len(dims) - 2:
                self.norms.append(torch.nn.BatchNorm1d(dims[i + 1]))
        self.batch_norm = batch_norm
        self.dropout = dropout
        self.autograd_backward = autograd_backward

    def propagate(self, adj, h):
        if self.autograd_backward:
            return torch.sparse.mm(adj, h)
        return SymSpMM.apply(adj, h)

    def forward(self, adj, x):
        h = x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = self.propagate(adj, h @ w) + b
            if i < last:
                if self.batch_norm:
                    h = self.norms[i](h)
                h = F.relu(h)
                h = F.dropout(h, p=self.dropout, training=self.training)
        return F.log_softmax(h, dim=1)


def main():
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(ARGS.seed)
    ds = ARGS.dataset
    try:
        with open(os.path.join(ds, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{ds}: cannot read meta.json: {e}")
    if meta.get("kind", "graph") != "graph":
        fail(f"{ds}: kind '{meta.get('kind')}' is not supported (graph datasets only)")
    labels_info = meta["labels"]
    if labels_info.get("kind") != "multiclass" or labels_info.get("columns", 1) != 1:
        fail(f"{ds}: only multiclass labels (1 column) are supported")
    splits = meta.get("splits", {})
    if not splits:
        fail(f"{ds}: dataset has no splits")
    # Same default as `halo train`: "public" if present, else the first (meta.json keys are sorted).
    if ARGS.split is not None:
        split = ARGS.split
    else:
        split = "public" if "public" in splits else sorted(splits)[0]
    if split not in splits:
        fail(f"{ds}: no split '{split}' (have: {', '.join(sorted(splits))})")

    n = int(meta["nodes"])
    num_classes = int(labels_info["classes"])
    offsets = load_array(ds, meta, "offsets")
    indices = load_array(ds, meta, "indices")
    weights = load_array(ds, meta, "edge_weights") if meta.get("edge_weights") else None
    adj = build_adjacency(offsets, indices, weights, n, ARGS.sparse_layout)
    del offsets, indices, weights
    x = torch.from_numpy(load_array(ds, meta, "features"))   # shares the numpy buffer
    if x.dim() == 1:
        x = x.unsqueeze(1)
    labels = torch.from_numpy(load_array(ds, meta, "labels").astype(np.int64).reshape(-1))
    train = torch.from_numpy(load_array(ds, meta, f"split.{split}.train").astype(np.int64))
    train = train[labels[train] >= 0]                        # -1 = missing label
    if train.numel() == 0:
        fail(f"{ds}: split '{split}' has no labelled train nodes")
    train_labels = labels[train]

    dims = [x.shape[1], ARGS.hidden, ARGS.hidden, num_classes]
    # The A_hat @ grad backward needs A_hat symmetric; a directed dataset gets torch's own.
    autograd_backward = ARGS.autograd_backward or bool(meta.get("directed", False))
    model = GCN(dims, not ARGS.no_batch_norm, ARGS.dropout, autograd_backward)
    opt = torch.optim.Adam(model.parameters(), lr=ARGS.lr, weight_decay=0.0)
    model.train()

    times = []
    loss_value = float("nan")
    for epoch in range(1, ARGS.epochs + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(adj, x)
        loss = F.nll_loss(out[train], train_labels)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        loss_value = loss.item()
        print(f"epoch {epoch}: loss {loss_value:.4f}, {t1 - t0:.3f} s", file=sys.stderr)

    accuracy = None
    if ARGS.eval:
        model.eval()
        with torch.no_grad():
            pred = model(adj, x).argmax(dim=1)
        accuracy = {}
        for part in ("train", "valid", "test"):
            ids = torch.from_numpy(load_array(ds, meta, f"split.{split}.{part}").astype(np.int64))
            ids = ids[labels[ids] >= 0]
            accuracy[part] = (pred[ids] == labels[ids]).double().mean().item() if len(ids) else None

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
    result = {
        "epoch_time_median_s": statistics.median(times),
        "epoch_times_s": times,
        "peak_rss_mb": peak_kib / 1024.0,
        "final_loss": loss_value,
        "torch_version": torch.__version__,
        "threads": ARGS.threads,
        "sparse_layout": ARGS.sparse_layout,
    }
    if accuracy is not None:
        result["accuracy"] = accuracy
    print(json.dumps(result))


if __name__ == "__main__":
    main()
