#!/usr/bin/env python3
"""Helper of tools/bench/headline.sh: records one benchmark run, describes the machine, and turns
the records into the headline table. Standard library only (runs with any python3, no peers).

    headline.py env JSONL --python PY --threads T --rounds R --epochs E --bin DIR
        Appends the machine record: CPU model, vendor, family/model, CPU count, AVX-512 BF16
        and AMX flags, date, halo's git commit, and the versions PY imports (torch, dgl,
        torch_geometric; "not installed" for each it cannot import).
    headline.py run JSONL --round R --bench B --run NAME --parse KIND:FILE --out PREFIX -- CMD..
        Runs CMD (stdout to PREFIX.out, stderr to PREFIX.err), appends one JSON record: the run's
        figures parsed from FILE by KIND, its wall seconds and the peak RSS of its processes
        (RUSAGE_CHILDREN), or "error" with the last line of PREFIX.err when it fails. Prints the
        record to stderr. Exits 0 either way: one failing contender does not end the benchmark.
        KIND: halo-train (halo train --log), peer-json (last JSON line of the file), halo-tgn
        (halo tgn train --log), json (a file holding one JSON object).
    headline.py skip JSONL --bench B --run NAME --reason TEXT
        Appends a record saying why NAME is not run (a peer not installed, no AVX-512 BF16).
    headline.py table JSONL [--md FILE]
        Prints the Markdown table (medians over rounds) and writes it to FILE.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

# (bench, run) -> label, in table order.
RUNS = [
    ("gcn", "halo-fp32", "halo, FP32"),
    ("gcn", "halo-bf16", "halo, `--matmul-precision bf16`"),
    ("gcn", "dgl", "DGL GraphConv (norm='both', self loops)"),
    ("gcn", "pyg", "PyG GCNConv (cached, normalize)"),
    ("gat", "halo", "halo, `--preset ogbn-arxiv-gat`"),
    ("gat", "dgl", "DGL GATConv (tools/bench/dgl_gat.py)"),
    ("tgn", "halo", "halo TGN, defaults"),
    ("tgn", "pyg", "PyG TGN (tools/bench/tgn_pyg.py)"),
]
BENCH_TITLES = {"gcn": "GCN, arxiv-sized", "gat": "GAT, arxiv-sized", "tgn": "TGN, UCI"}
# AP "unchanged": halo's test AP at most this far below PyG's.
AP_TOLERANCE = 0.01


def append(path, rec):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def json_lines(path):
    """The JSON objects of a JSON-lines file, skipping lines that are not JSON objects."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def parse_result(kind, path):
    """The figures of one run from its output file; raises ValueError/OSError/KeyError if absent."""
    if kind == "halo-train":
        recs = json_lines(path)
        epochs = [r for r in recs if r.get("type") == "epoch"]
        s = recs[-1]
        out = {"epoch_s": s["epoch_time_median_s"], "final_loss": epochs[-1]["loss"],
               "first_loss": epochs[0]["loss"]}
        if "bf16_kernel" in s:  # the CPU's bf16 kernel --bf16-kernel auto chose
            out["bf16_kernel"] = s["bf16_kernel"]
        return out
    if kind == "peer-json":
        s = json_lines(path)[-1]
        out = {"epoch_s": s["epoch_time_median_s"], "final_loss": s["final_loss"]}
        if "first_loss" in s:
            out["first_loss"] = s["first_loss"]
        return out
    if kind in ("halo-tgn", "json"):
        s = json_lines(path)[-1]
        return {"events_per_s": s["events_per_s"], "test_ap": s["test_ap"]}
    raise ValueError(f"unknown result kind '{kind}'")


def cmd_run(a):
    kind, _, path = a.parse.partition(":")
    t0 = time.perf_counter()
    with open(a.out + ".out", "w") as out, open(a.out + ".err", "w") as err:
        try:
            rc = subprocess.run(a.cmd, stdout=out, stderr=err).returncode
        except OSError as e:
            rc = 127
            err.write(f"{a.cmd[0]}: {e}\n")
    wall = time.perf_counter() - t0
    rec = {"type": "run", "round": a.round, "bench": a.bench, "run": a.run,
           "wall_s": round(wall, 3),
           "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0}
    if rc == 0:
        try:
            rec.update(parse_result(kind, path))
        except (OSError, ValueError, KeyError, IndexError) as e:
            rec["error"] = f"no result in {path}: {type(e).__name__} {e}"
    else:
        try:
            with open(a.out + ".err", encoding="utf-8", errors="replace") as f:
                lines = [ln.strip() for ln in f if ln.strip()]
            last = lines[-1] if lines else ""
        except OSError:
            last = ""
        rec["error"] = f"exit status {rc}: {last[:200]} (see {a.out}.err)"
    append(a.jsonl, rec)
    shown = {k: v for k, v in rec.items() if k != "type"}
    print(json.dumps(shown), file=sys.stderr, flush=True)


def cmd_skip(a):
    append(a.jsonl, {"type": "skip", "bench": a.bench, "run": a.run, "reason": a.reason})


def first_line_value(text, key):
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


def cmd_env(a):
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True,
                               env={**os.environ, "LC_ALL": "C"}).stdout
    except OSError:
        lscpu = ""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))

    def git(*args):
        r = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    probe = ("import importlib, json, os, sys\n"
             "os.environ.setdefault('DGLBACKEND', 'pytorch')\n"
             "out = {}\n"
             "for m in ('torch', 'dgl', 'torch_geometric'):\n"
             "    try:\n"
             "        out[m] = importlib.import_module(m).__version__\n"
             "    except Exception as e:\n"
             "        out[m] = None\n"
             "print(json.dumps(out))\n")
    try:
        r = subprocess.run([a.python, "-c", probe], capture_output=True, text=True, timeout=300)
        versions = json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        versions = {"torch": None, "dgl": None, "torch_geometric": None}
    cpus = first_line_value(lscpu, "CPU(s)")
    rec = {
        "type": "env",
        "cpu_model": first_line_value(lscpu, "Model name") or platform.processor() or "unknown",
        "cpu_vendor": first_line_value(lscpu, "Vendor ID"),
        "cpu_family": first_line_value(lscpu, "CPU family"),
        "cpu_model_number": first_line_value(lscpu, "Model"),
        "hypervisor": first_line_value(lscpu, "Hypervisor vendor"),
        "cpus": int(cpus) if cpus and cpus.isdigit() else os.cpu_count(),
        "threads_per_core": first_line_value(lscpu, "Thread(s) per core"),
        "avx512_bf16": "avx512_bf16" in flags,
        "amx": sorted(f for f in flags if f.startswith("amx")),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "halo_commit": commit,
        "halo_bin": a.bin,
        "python": a.python,
        "versions": versions,
        "threads": a.threads,
        "rounds": a.rounds,
        "epochs": a.epochs,
    }
    append(a.jsonl, rec)


def fmt_ratio(x):
    return "n/a" if x is None else f"{x:.2f}x"


def table(recs):
    """The Markdown text of the headline table for the records of one benchmark run."""
    env = next((r for r in recs if r.get("type") == "env"), {})
    runs = [r for r in recs if r.get("type") == "run"]
    skips = {(r["bench"], r["run"]): r["reason"] for r in recs if r.get("type") == "skip"}
    v = env.get("versions", {})

    def ver(m):
        return v.get(m) or "not installed"

    cpu = env.get("cpu_model", "unknown")
    extra = ", ".join(x for x in (
        env.get("cpu_vendor"),
        f"family {env['cpu_family']} model {env['cpu_model_number']}"
        if env.get("cpu_family") else None,
        f"{env['hypervisor']} guest" if env.get("hypervisor") else None) if x)
    amx = ", ".join(env.get("amx", [])) or "none"
    lines = [
        f"**CPU:** {cpu} ({extra}); {env.get('cpus', '?')} logical CPUs "
        f"({env.get('threads_per_core', '?')} thread(s) per core), "
        f"{env.get('threads', '?')} threads used per run; AVX-512 BF16: "
        f"{'yes' if env.get('avx512_bf16') else 'no'}; AMX: {amx}",
        f"**Date:** {env.get('date_utc', '?')}; "
        f"**halo** {env.get('halo_commit') or 'unknown commit'}; "
        f"**peers:** torch {ver('torch')}, dgl {ver('dgl')}, torch_geometric "
        f"{ver('torch_geometric')} ({env.get('python', '?')})",
        "",
        f"Medians over {env.get('rounds', '?')} interleaved round(s) (each round runs every "
        f"contender once, in table order), {env.get('epochs', '?')} epochs per run; a ratio is "
        "the median of the per-round ratios.",
        "",
        "| benchmark | contender | median epoch / throughput | peak RSS MiB | final loss / test AP "
        "| ratio | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def of(bench, run):
        return [r for r in runs if r["bench"] == bench and r["run"] == run]

    def good(bench, run):
        return [r for r in of(bench, run) if "error" not in r]

    def by_round(bench, run):
        return {r["round"]: r for r in good(bench, run)}

    def ratio(bench, a_run, b_run, f):
        """Median over the rounds where both ran of f(a record, b record)."""
        a, b = by_round(bench, a_run), by_round(bench, b_run)
        xs = [f(a[k], b[k]) for k in sorted(a) if k in b]
        return statistics.median(xs) if xs else None

    def met(x, ok):
        return "—" if x is None else ("yes" if ok(x) else "no")

    # (bench, run) -> (ratio text, target text, met text)
    cmp = {}
    r = ratio("gcn", "halo-fp32", "dgl", lambda h, d: d["epoch_s"] / h["epoch_s"])
    cmp[("gcn", "dgl")] = (f"halo FP32 {fmt_ratio(r)} faster", ">= 4.5x",
                           met(r, lambda x: x >= 4.5))
    r = ratio("gcn", "halo-fp32", "pyg", lambda h, p: p["epoch_s"] / h["epoch_s"])
    cmp[("gcn", "pyg")] = (f"halo FP32 {fmt_ratio(r)} faster", "", "")
    r = ratio("gcn", "halo-bf16", "halo-fp32", lambda b, h: h["epoch_s"] / b["epoch_s"])
    cmp[("gcn", "halo-bf16")] = (f"{fmt_ratio(r)} speed-up over FP32", ">= 1.0x",
                                 met(r, lambda x: x >= 1.0))
    r = ratio("gat", "halo", "dgl", lambda h, d: h["epoch_s"] / d["epoch_s"])
    cmp[("gat", "dgl")] = (f"halo's epoch {fmt_ratio(r)} DGL's", "<= 0.4x",
                           met(r, lambda x: x <= 0.4))
    r = ratio("tgn", "halo", "pyg", lambda h, p: h["events_per_s"] / p["events_per_s"])
    ap = ratio("tgn", "halo", "pyg", lambda h, p: h["test_ap"] - p["test_ap"])
    ap_text = "" if ap is None else f", test AP {ap:+.4f}"
    cmp[("tgn", "pyg")] = (
        f"halo {fmt_ratio(r)} PyG's events/s{ap_text}",
        f">= 2x, AP not below PyG's by > {AP_TOLERANCE}",
        met(None if r is None or ap is None else (r, ap),
            lambda x: x[0] >= 2.0 and x[1] >= -AP_TOLERANCE))

    labels = {"dgl": f"DGL {v['dgl']}" if v.get("dgl") else "DGL",
              "pyg": f"PyG {v['torch_geometric']}" if v.get("torch_geometric") else "PyG"}
    for bench, run, label in RUNS:
        all_runs, ok = of(bench, run), good(bench, run)
        if not all_runs and (bench, run) not in skips:
            continue  # not selected
        title = BENCH_TITLES[bench]
        if run in labels:
            label = label.replace("DGL", labels["dgl"], 1).replace("PyG", labels["pyg"], 1)
        kernels = sorted({r["bf16_kernel"] for r in good(bench, run) if "bf16_kernel" in r})
        if kernels:
            label += f" (kernel {', '.join(kernels)})"
        rt, tg, mt = cmp.get((bench, run), ("", "", ""))
        if (bench, run) in skips:
            lines.append(f"| {title} | {label} | {skips[(bench, run)]} |  |  |  | {tg} |  |")
            continue
        if not ok:
            lines.append(f"| {title} | {label} | failed: {all_runs[-1]['error']} |  |  |  "
                         f"| {tg} |  |")
            continue
        med = lambda k: statistics.median(x[k] for x in ok)  # noqa: E731
        if bench == "tgn":
            speed, quality = f"{med('events_per_s'):,.0f} events/s", f"AP {med('test_ap'):.4f}"
        else:
            speed, quality = f"{med('epoch_s'):.3f} s", f"{ok[-1]['final_loss']:.4f}"
        failed = len(all_runs) - len(ok)
        if failed:
            speed += f" ({failed} of {len(all_runs)} runs failed)"
        lines.append(f"| {title} | {label} | {speed} | {med('rss_mb'):,.0f} | {quality} | {rt} "
                     f"| {tg} | {mt} |")
    shown = {b for b, _ in skips} | {r["bench"] for r in runs}
    notes = {
        "gcn": "GCN: `halo train --preset ogbn-arxiv-gcn` (3 x 256, batch norm, dropout 0.5, "
               "Adam 0.01) and the same model in DGL and PyG (tools/bench/peer_gcn.py) on the "
               "generated arxiv-sized graph renumbered by `halo reorder --method metis --block "
               "4096`; final loss: the last epoch's training loss.",
        "gat": "GAT: `halo train --preset ogbn-arxiv-gat` against the same model in DGL "
               "(tools/bench/dgl_gat.py) on the same graph.",
        "tgn": "TGN: `halo tgn train` defaults against PyG's TGN (tools/bench/tgn_pyg.py, not yet "
               "a reference: #22) on the UCI messages, split and evaluation negatives of `halo "
               "tgn split`; test AP of the best validation epoch.",
    }
    lines.append("")
    lines += [notes[b] for b in ("gcn", "gat", "tgn") if b in shown]
    lines.append("Peak RSS: the largest of the run's processes (getrusage of the children).")
    return "\n".join(lines) + "\n"


def cmd_table(a):
    text = table(json_lines(a.jsonl))
    sys.stdout.write(text)
    if a.md:
        tmp = a.md + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, a.md)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("env")
    e.add_argument("jsonl")
    e.add_argument("--python", required=True)
    e.add_argument("--threads", type=int, required=True)
    e.add_argument("--rounds", type=int, required=True)
    e.add_argument("--epochs", type=int, required=True)
    e.add_argument("--bin", required=True)
    r = sub.add_parser("run")
    r.add_argument("jsonl")
    r.add_argument("--round", type=int, required=True)
    r.add_argument("--bench", choices=sorted(BENCH_TITLES), required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--parse", required=True, help="KIND:FILE")
    r.add_argument("--out", required=True, help="prefix of the .out and .err files")
    s = sub.add_parser("skip")
    s.add_argument("jsonl")
    s.add_argument("--bench", choices=sorted(BENCH_TITLES), required=True)
    s.add_argument("--run", required=True)
    s.add_argument("--reason", required=True)
    t = sub.add_parser("table")
    t.add_argument("jsonl")
    t.add_argument("--md")
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:len(argv) - len(cmd) - 1] if "--" in argv else argv)
    if a.command == "run" and not cmd:
        p.error("run: no command after --")
    a.cmd = cmd
    {"env": cmd_env, "run": cmd_run, "skip": cmd_skip, "table": cmd_table}[a.command](a)


if __name__ == "__main__":
    main()
