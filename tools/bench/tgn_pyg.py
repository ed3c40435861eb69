#!/usr/bin/env python3
"""Peer benchmark: PyTorch Geometric's TGN (the model of PyG's examples/tgn.py) on halo's split.

Trains TGNMemory (IdentityMessage, LastAggregator), LastNeighborLoader (10 most recent
neighbours), a TransformerConv graph attention embedding and a link predictor on the events,
chronological split, held-out new nodes and evaluation negatives that `halo tgn split` writes,
and scores them as `halo tgn train` does (runtime/src/temporal/tgn_scores.cc): AP and AUC are means over
consecutive groups of --batch-size evaluation events (one positive and its fixed negative each),
new-node AP over consecutive groups of the inductive events. Widths, neighbours, heads, batch and
Adam's learning rate are halo's defaults. --edgebank scores EdgeBank-infinity instead, exactly as
`halo tgn train --model edgebank` (same figures to the last digit: the check that split and
negatives are the same).

    build/bin/halo tgn split /tmp/uci -o /tmp/uci-split.npz
    /tmp/dgl/bin/python tools/bench/tgn_pyg.py /tmp/uci-split.npz --epochs 5 --threads 2
    /tmp/dgl/bin/python tools/bench/tgn_pyg.py /tmp/uci-split.npz --edgebank
    python3 tools/bench/tgn_pyg.py /tmp/uci-split.npz --device cuda   # on a GPU (peak_gpu_mb)

Not yet a reference (#22): its EdgeBank figures equal halo's to the last digit, but its TGN reaches
test AP 0.70 at its best validation epoch (the first; validation AP falls after it), where
PyG's TGN measured earlier on this split reached 0.81. Until that difference is explained
(a training or evaluation step of this script that differs from PyG's example), its TGN figures
are not quoted in docs/BENCHMARKS.md.

PyG semantics throughout: a batch sees neighbours and memory of earlier batches only (halo's
`--neighbors-before batch`), memory and neighbours restart every epoch, evaluation runs on the
memory left by training, validation then test (halo carries it on the same way). Evaluation
neighbours are every earlier event, training events of held-out nodes included, as halo's
evaluation sampler has them. Prints one line per epoch and a one-line JSON summary (the test
figures of the best validation epoch, as halo's summary), also written to --json. With more
than one thread torch's reductions vary from run to run (test AP by about 0.005 on UCI after one
epoch); --deterministic fixes them.
"""
import argparse
import json
import resource
import sys
import time

import numpy as np


def rss_mb():  # resident now
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- Metrics, as halo's gnn/src/metrics.cc (float32 scores, ties form one threshold) ---------


def average_precision(s, y):
    """sklearn's average_precision_score: precision at each distinct threshold weighted by the
    recall it adds."""
    pos = int(y.sum())
    if pos == 0:
        return 0.0
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    tp = np.cumsum(y)
    fp = np.cumsum(1 - y)
    ends = np.r_[np.nonzero(s[1:] != s[:-1])[0], len(s) - 1]  # last index of each tie group
    recall = tp[ends] / pos
    precision = tp[ends] / (tp[ends] + fp[ends])
    return float(np.sum(np.diff(recall, prepend=0.0) * precision))


def rocauc(s, y):
    """Mann-Whitney U with average ranks over ties; 0 without both classes."""
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return 0.0
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    starts = np.r_[0, np.nonzero(s[1:] != s[:-1])[0] + 1]
    ends = np.r_[starts[1:], len(s)] - 1
    avg = (starts + ends) / 2 + 1  # 1-based average rank of each tie group
    ranks = np.repeat(avg, ends - starts + 1)
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


class Scores:
    """Scores of a range of events, in event order: one positive and one negative each."""

    def __init__(self, batch):
        self.batch, self.pos, self.neg, self.ind = batch, [], [], []

    def add(self, pos, neg, inductive):
        self.pos.append(np.asarray(pos, np.float32))
        self.neg.append(np.asarray(neg, np.float32))
        self.ind.append(np.asarray(inductive, bool))

    def _arrays(self, inductive):
        if not self.pos:
            return np.zeros(0, np.float32), np.zeros(0, np.float32)
        p, n, m = (np.concatenate(v) for v in (self.pos, self.neg, self.ind))
        return (p[m], n[m]) if inductive else (p, n)

    def _batch_mean(self, metric, inductive):  # halo's batch_mean: groups of `batch` events
        p, n = self._arrays(inductive)
        vals = []
        for b in range(0, len(p), self.batch):
            pp, nn = p[b:b + self.batch], n[b:b + self.batch]
            vals.append(metric(np.r_[pp, nn], np.r_[np.ones(len(pp), np.int64),
                                                    np.zeros(len(nn), np.int64)]))
        return float(np.mean(vals)) if vals else 0.0

    def _pooled(self, inductive):
        p, n = self._arrays(inductive)
        return average_precision(np.r_[p, n], np.r_[np.ones(len(p), np.int64),
                                                    np.zeros(len(n), np.int64)])

    def figures(self, prefix):
        return {f"{prefix}_ap": self._batch_mean(average_precision, False),
                f"{prefix}_auc": self._batch_mean(rocauc, False),
                f"{prefix}_inductive_ap": self._batch_mean(average_precision, True),
                f"{prefix}_inductive_auc": self._batch_mean(rocauc, True),
                f"{prefix}_ap_pooled": self._pooled(False),
                f"{prefix}_inductive_ap_pooled": self._pooled(True)}


# --- EdgeBank-infinity, as halo's edgebank() in runtime/src/temporal/tgn_scores.cc -----------------------


def edgebank(d, batch):
    """Each range in batches from its start: a batch's events and their negatives score 1 if the
    directed pair (src, dst) was in an earlier batch (every training event counts, held-out
    nodes' too), then the batch's pairs join the bank."""
    src, dst, neg, ind = d["src"], d["dst"], d["eval_neg"], d["inductive"]
    seen = set()
    out = {}
    bounds = [(0, d["train_end"]), (d["train_end"], d["valid_end"]), (d["valid_end"], len(src))]
    for name, (lo, hi) in zip(("train", "valid", "test"), bounds):
        sc = Scores(batch)
        for b0 in range(lo, hi, batch):
            b1 = min(hi, b0 + batch)
            s, t, n = src[b0:b1].tolist(), dst[b0:b1].tolist(), neg[b0:b1].tolist()
            sc.add([float((a, b) in seen) for a, b in zip(s, t)],
                   [float((a, b) in seen) for a, b in zip(s, n)], ind[b0:b1] != 0)
            seen.update(zip(s, t))
        out[name] = sc
    return out


# --- TGN with PyG --------------------------------------------------------------------------


def run_tgn(a, d, log):
    import torch
    from torch.nn import Linear
    from torch_geometric.nn import TGNMemory, TransformerConv
    from torch_geometric.nn.models.tgn import IdentityMessage, LastAggregator, LastNeighborLoader

    import_rss = rss_mb()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(a.deterministic)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)

    nodes, E = d["nodes"], len(d["src"])
    train_end, valid_end, batch = d["train_end"], d["valid_end"], a.batch_size
    t = d["t"] - d["t"][0]  # halo starts every memory's last update at the first event's time
    if not np.all(t == np.round(t)):
        print("warning: timestamps are not whole numbers; TGNMemory keeps them as int64 (rounded)",
              file=sys.stderr)
    t = torch.from_numpy(np.round(t).astype(np.int64))
    src, dst = torch.from_numpy(d["src"]), torch.from_numpy(d["dst"])
    msg = d["msg"].reshape(E, -1)
    if msg.shape[1] == 0:  # TGNMemory cannot concatenate 0-wide messages: one zero column
        msg = np.zeros((E, 1), np.float32)
    msg = torch.from_numpy(np.ascontiguousarray(msg, np.float32))
    eval_neg = torch.from_numpy(d["eval_neg"])
    inductive = d["inductive"] != 0
    train_ids = torch.from_numpy(np.nonzero(d["train_keep"][:train_end])[0])
    tr_src, tr_dst, tr_t, tr_msg = src[train_ids], dst[train_ids], t[train_ids], msg[train_ids]
    # Everything the batches index lives where the model computes (PyG's example on CUDA).
    src, dst, t, msg, eval_neg = (x.to(dev) for x in (src, dst, t, msg, eval_neg))
    tr_src, tr_dst, tr_t, tr_msg = (x.to(dev) for x in (tr_src, tr_dst, tr_t, tr_msg))
    n_train = len(train_ids)
    n_run = min(n_train, a.max_train_events) if a.max_train_events > 0 else n_train

    mem_dim = time_dim = emb_dim = 100
    memory = TGNMemory(nodes, msg.size(-1), mem_dim, time_dim,
                       message_module=IdentityMessage(msg.size(-1), mem_dim, time_dim),
                       aggregator_module=LastAggregator())

    class GraphAttentionEmbedding(torch.nn.Module):
        def __init__(self, in_channels, out_channels, msg_dim, time_enc):
            super().__init__()
            self.time_enc = time_enc
            self.conv = TransformerConv(in_channels, out_channels // a.heads, heads=a.heads,
                                        dropout=0.1, edge_dim=msg_dim + time_enc.out_channels)

        def forward(self, x, last_update, edge_index, t, msg):
            rel_t = last_update[edge_index[0]] - t
            edge_attr = torch.cat([self.time_enc(rel_t.to(x.dtype)), msg], dim=-1)
            return self.conv(x, edge_index, edge_attr)

    class LinkPredictor(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.lin_src, self.lin_dst, self.lin_final = Linear(c, c), Linear(c, c), Linear(c, 1)

        def forward(self, z_src, z_dst):
            return self.lin_final((self.lin_src(z_src) + self.lin_dst(z_dst)).relu())

    gnn = GraphAttentionEmbedding(mem_dim, emb_dim, msg.size(-1), memory.time_enc)
    pred = LinkPredictor(emb_dim)
    memory, gnn, pred = memory.to(dev), gnn.to(dev), pred.to(dev)
    params = list(memory.parameters()) + list(gnn.parameters()) + list(pred.parameters())
    params = list({id(p): p for p in params}.values())  # time_enc is shared
    opt = torch.optim.Adam(params, lr=a.lr)
    bce = torch.nn.BCEWithLogitsLoss()
    loader = LastNeighborLoader(nodes, size=a.neighbors, device=dev)
    assoc = torch.empty(nodes, dtype=torch.long, device=dev)

    def scores(s, d_, n, ts, ms):
        """Logits of (s, d_) and (s, n) from memory and neighbours before this batch; ts, ms:
        the times and messages the loader's event ids index."""
        n_id = torch.cat([s, d_, n]).unique()
        n_id, edge_index, e_id = loader(n_id)
        assoc[n_id] = torch.arange(n_id.size(0), device=dev)
        z, last_update = memory(n_id)
        z = gnn(z, last_update, edge_index, ts[e_id], ms[e_id])
        return pred(z[assoc[s]], z[assoc[d_]]), pred(z[assoc[s]], z[assoc[n]])

    def train_epoch(epoch):
        memory.train(), gnn.train(), pred.train()
        memory.reset_state()
        loader.reset_state()  # its event ids count the inserted training events: tr_* index them
        gen = torch.Generator().manual_seed(a.seed * 1000003 + epoch)
        total = 0.0
        start = time.perf_counter()
        for b0 in range(0, n_run, batch):
            s, d_ = tr_src[b0:b0 + batch], tr_dst[b0:b0 + batch]
            n = torch.randint(0, nodes, (len(s),), generator=gen).to(dev)
            opt.zero_grad()
            pos, neg = scores(s, d_, n, tr_t, tr_msg)
            loss = bce(pos, torch.ones_like(pos)) + bce(neg, torch.zeros_like(neg))
            memory.update_state(s, d_, tr_t[b0:b0 + batch], tr_msg[b0:b0 + batch])
            loader.insert(s, d_)
            loss.backward()
            opt.step()
            memory.detach()
            total += float(loss) * len(s)  # float() waits for the GPU: the time below is whole
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return total / max(1, n_run), time.perf_counter() - start

    @torch.no_grad()
    def evaluate(epoch):
        memory.eval(), gnn.eval(), pred.eval()  # eval() flushes pending messages (PyG)
        # Neighbours: every event before, as halo's evaluation sampler; the loader's ids are now
        # event ids (inserted from 0, in batches as PyG's loop would).
        loader.reset_state()
        for b0 in range(0, train_end, batch):
            loader.insert(src[b0:b0 + batch], dst[b0:b0 + batch])
        out = []
        for lo, hi in ((train_end, valid_end), (valid_end, E)):
            sc = Scores(batch)
            for b0 in range(lo, hi, batch):
                b1 = min(hi, b0 + batch)
                s, d_ = src[b0:b1], dst[b0:b1]
                pos, neg = scores(s, d_, eval_neg[b0:b1], t, msg)
                pos, neg = pos.sigmoid().view(-1).cpu().numpy(), neg.sigmoid().view(-1).cpu().numpy()
                if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
                    raise SystemExit(f"epoch {epoch}: non-finite scores; the model diverged")
                sc.add(pos, neg, inductive[b0:b1])
                memory.update_state(s, d_, t[b0:b1], msg[b0:b1])
                loader.insert(s, d_)
            out.append(sc)
        return out

    speeds, best, since_best = [], None, 0
    for epoch in range(1, a.epochs + 1):
        if since_best >= a.patience:
            break
        loss, secs = train_epoch(epoch)
        speeds.append(n_run / secs)
        if a.skip_eval:  # throughput runs: no validation or test pass, as halo's --skip-eval
            log({"type": "epoch", "epoch": epoch, "loss": loss, "epoch_time_s": secs,
                 "events_per_s": speeds[-1]})
            print(f"epoch {epoch:3d}  loss {loss:.4f}  {speeds[-1]:.0f} events/s", flush=True)
            continue
        val, test = evaluate(epoch)
        rec = {"type": "epoch", "epoch": epoch, "loss": loss, **val.figures("valid"),
               **test.figures("test"), "epoch_time_s": secs, "events_per_s": speeds[-1]}
        log(rec)
        print(f"epoch {epoch:3d}  loss {loss:.4f}  valid AP {rec['valid_ap']:.4f} AUC "
              f"{rec['valid_auc']:.4f} (new nodes AP {rec['valid_inductive_ap']:.4f})  "
              f"{speeds[-1]:.0f} events/s", flush=True)
        if best is None or rec["valid_ap"] > best["valid_ap"]:
            best, since_best = rec, 0
        else:
            since_best += 1
    summary = {} if best is None else {
        k: best[k] for k in ("valid_ap", "test_ap", "test_auc", "test_inductive_ap",
                             "test_inductive_auc", "test_ap_pooled", "test_inductive_ap_pooled")}
    if best is not None:
        summary["best_epoch"] = best["epoch"]
    summary.update(epochs=len(speeds),
                   events_per_s=sorted(speeds)[len(speeds) // 2],  # halo's median epoch
                   epoch_events_per_s=speeds, train_events=n_run, import_rss_mb=import_rss,
                   device=a.device)
    if dev.type == "cuda":
        summary["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
        summary["peak_gpu_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("split", help=".npz written by `halo tgn split DATASET -o FILE.npz`")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the model, memory, neighbour loader and events live")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the summary line here")
    p.add_argument("--edgebank", action="store_true", help="score EdgeBank-infinity instead")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--neighbors", type=int, default=10)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--patience", type=int, default=5,
                   help="stop after this many epochs without a better validation AP (as halo)")
    p.add_argument("--log", help="JSON lines, one per epoch")
    p.add_argument("--max-train-events", type=int, default=0,
                   help="train on at most this many events per epoch (0 = all; throughput runs)")
    p.add_argument("--skip-eval", action="store_true",
                   help="no validation or test pass (throughput runs; no AP is reported)")
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms: the same figures on every run with "
                        "several threads too (by default, as PyG runs, only with --threads 1)")
    a = p.parse_args()

    with np.load(a.split) as z:
        d = {k: z[k] for k in z.files}
    for k in ("nodes", "train_end", "valid_end"):
        d[k] = int(d[k][0])
    logf = open(a.log, "w") if a.log else None

    def log(rec):
        if logf:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()

    if a.edgebank:
        r = edgebank(d, a.batch_size)
        summary = {"model": "edgebank", "valid_ap": r["valid"].figures("valid")["valid_ap"],
                   **r["test"].figures("test")}
        print(f"edgebank: test AP {summary['test_ap']:.4f}, AUC {summary['test_auc']:.4f}; new "
              f"nodes AP {summary['test_inductive_ap']:.4f}, AUC "
              f"{summary['test_inductive_auc']:.4f} (pooled AP {summary['test_ap_pooled']:.4f}, "
              f"new nodes {summary['test_inductive_ap_pooled']:.4f})")
    else:
        summary = {"model": "pyg-tgn", **run_tgn(a, d, log)}
        if a.skip_eval:
            print(f"pyg-tgn: {summary['events_per_s']:.0f} events/s (no evaluation)")
        else:
            print(f"pyg-tgn: test AP {summary['test_ap']:.4f}, AUC {summary['test_auc']:.4f}; new "
                  f"nodes AP {summary['test_inductive_ap']:.4f} (best epoch "
                  f"{summary['best_epoch']}, {summary['events_per_s']:.0f} events/s)")
    summary.update(type="summary", threads=a.threads, seed=a.seed, deterministic=a.deterministic,
                   peak_rss_mb=peak_rss_mb())
    log(summary)
    line = json.dumps(summary)
    print(line)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
