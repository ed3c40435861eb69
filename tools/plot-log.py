#!/usr/bin/python3
"""Plots a halo training log (JSON lines) as a 2x2 figure.

    tools/plot-log.py LOG.jsonl -o curves.png

Panels: loss per epoch; train/valid/test metric per epoch; epoch time per epoch; epoch-time
breakdown (stacked areas of whichever of compute_s, halo_wait_s, allreduce_s the log has, else
epoch_time_s alone). Several runs (the "run" key) give one line per run; the breakdown panel
shows run 0 (the first run present). A "summary" record becomes the figure title.

Records used:
    {"type": "epoch", "run": 0, "epoch": 1, "loss": ..., "train": ..., "valid": ..., "test": ...,
     "epoch_time_s": ..., optional "compute_s", "halo_wait_s", "allreduce_s", ...}
    {"type": "summary", "metric": "acc", "valid_mean": ..., "valid_std": ..., "test_mean": ...,
     "test_std": ..., "runs": R, "epoch_time_median_s": ..., "peak_rss_mb": ...}
Other record types and unknown keys are ignored. Blank lines are skipped.

Errors (missing file, a line that is not a JSON object, no epoch records) print one line
"plot-log: FILE:LINE: message" on stderr and exit 1 without writing the output; the figure is
written to a temporary file beside the output and renamed into place.

Needs matplotlib (Debian: apt-get install python3-matplotlib; run with /usr/bin/python3).
"""

import argparse
import json
import math
import os
import sys
import tempfile

BREAKDOWN_KEYS = ("compute_s", "halo_wait_s", "allreduce_s")
METRICS = ("train", "valid", "test")


class LogError(Exception):
    pass


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_log(path):
    """Returns (epochs by run: {run: [record, ...] sorted by epoch}, last summary or None)."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise LogError(f"{path}: cannot open: {e.strerror or e}") from None
    runs = {}
    summary = None
    with f:
        try:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
                    raise LogError(f"{path}:{lineno}: invalid JSON: {msg}") from None
                if not isinstance(rec, dict):
                    raise LogError(f"{path}:{lineno}: record is not a JSON object")
                kind = rec.get("type")
                if kind == "epoch":
                    epoch = rec.get("epoch")
                    if not is_number(epoch):
                        raise LogError(f"{path}:{lineno}: epoch record without a numeric 'epoch'")
                    run = rec.get("run", 0)
                    if not is_number(run):
                        raise LogError(f"{path}:{lineno}: epoch record with a non-numeric 'run'")
                    runs.setdefault(int(run), []).append(rec)
                elif kind == "summary":
                    summary = rec
        except UnicodeDecodeError as e:
            raise LogError(f"{path}: not UTF-8 text: {e.reason}") from None
    if not runs:
        raise LogError(f"{path}: no epoch records")
    for recs in runs.values():
        recs.sort(key=lambda r: r["epoch"])
    return runs, summary


def series(recs, key):
    xs, ys = [], []
    for r in recs:
        v = r.get(key)
        if is_number(v):
            xs.append(r["epoch"])
            ys.append(v)
    return xs, ys


def fmt(v, spec):
    return format(v, spec) if is_number(v) else "?"


def title_text(summary):
    if summary is None:
        return None
    metric = summary.get("metric", "metric")
    parts = []
    if "valid_mean" in summary or "test_mean" in summary:
        parts.append(f"valid {metric} {fmt(summary.get('valid_mean'), '.4f')} "
                     f"± {fmt(summary.get('valid_std'), '.4f')}, "
                     f"test {fmt(summary.get('test_mean'), '.4f')} "
                     f"± {fmt(summary.get('test_std'), '.4f')}")
    extra = []
    if "runs" in summary:
        extra.append(f"{summary['runs']} run{'s' if summary['runs'] != 1 else ''}")
    if is_number(summary.get("epoch_time_median_s")):
        extra.append(f"median epoch {summary['epoch_time_median_s'] * 1e3:.1f} ms")
    if is_number(summary.get("peak_rss_mb")):
        extra.append(f"peak RSS {summary['peak_rss_mb']:.0f} MiB")
    if extra:
        parts.append(", ".join(extra))
    return "\n".join(parts) if parts else None


def plot(runs, summary, out_path, log_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    multi = len(runs) > 1
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    ax_loss, ax_metric, ax_time, ax_break = axes.flat
    metric_name = (summary or {}).get("metric", "metric")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    for i, (run, recs) in enumerate(sorted(runs.items())):
        xs, ys = series(recs, "loss")
        if xs:
            ax_loss.plot(xs, ys, label=f"run {run}" if multi else None,
                         color=colors[i % len(colors)])
        xs, ys = series(recs, "epoch_time_s")
        if xs:
            ax_time.plot(xs, [y * 1e3 for y in ys], label=f"run {run}" if multi else None,
                         color=colors[i % len(colors)])
        for j, m in enumerate(METRICS):
            xs, ys = series(recs, m)
            if xs:
                # Colour by split, one line per run, one legend entry per split.
                ax_metric.plot(xs, ys, label=m if i == 0 else None, color=colors[j % len(colors)],
                               linewidth=1.5 if not multi else 1.0, alpha=1.0 if not multi else 0.6)

    ax_loss.set(title="loss", xlabel="epoch", ylabel="loss")
    ax_metric.set(title=f"{metric_name} per epoch" + (f" ({len(runs)} runs)" if multi else ""),
                  xlabel="epoch", ylabel=metric_name)
    ax_time.set(title="epoch time", xlabel="epoch", ylabel="ms")

    # Breakdown of the first run present.
    first_run = min(runs)
    recs = runs[first_run]
    keys = [k for k in BREAKDOWN_KEYS if any(is_number(r.get(k)) for r in recs)]
    if not keys:
        keys = ["epoch_time_s"]
    epochs = [r["epoch"] for r in recs]
    stacks = [[(r.get(k) if is_number(r.get(k)) else 0.0) * 1e3 for r in recs] for k in keys]
    if len(epochs) > 1:
        ax_break.stackplot(epochs, *stacks, labels=keys, alpha=0.8)
    else:
        bottom = 0.0
        for k, s in zip(keys, stacks):
            ax_break.bar(epochs, s, bottom=bottom, label=k)
            bottom += s[0]
    ax_break.set(title="epoch time breakdown" + (f" (run {first_run})" if multi else ""),
                 xlabel="epoch", ylabel="ms")
    ax_break.legend(loc="upper right", fontsize="small")

    for ax in (ax_loss, ax_metric, ax_time):
        # Per-run legends only while they stay readable.
        if 0 < len(ax.get_legend_handles_labels()[0]) <= 10:
            ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
    ax_break.grid(True, alpha=0.3)

    title = title_text(summary)
    fig.suptitle(title if title else os.path.basename(log_path), fontsize="medium")
    fig.tight_layout()

    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix=".plot-log-", suffix=".png", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
        os.replace(tmp, out_path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        plt.close(fig)


def main():
    p = argparse.ArgumentParser(description="Plot a halo JSON-lines training log.")
    p.add_argument("log", help="JSON-lines training log")
    p.add_argument("-o", "--output", required=True, help="output PNG")
    args = p.parse_args()
    try:
        runs, summary = read_log(args.log)
        plot(runs, summary, args.output, args.log)
    except LogError as e:
        print(f"plot-log: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"plot-log: {args.output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
