#!/usr/bin/python3
"""Tests tools/bench/headline.sh's pieces that need neither the peers nor a benchmark run
(plain script, no pytest; a few seconds):

    /usr/bin/python3 tests/tools/headline_test.py

the table of tools/bench/headline.py from made-up records (ratios, targets, rows of peers not
installed, of a failed run, of bf16 on a CPU without it), its run recorder, headline.sh's
refusals, and peer_gcn.py's argument errors (parsed before torch is imported). Exit status 0
when all pass; the last line is "N passed, N failed".
"""

import json
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "tools", "bench"))
sys.path.insert(0, BENCH)
import headline  # noqa: E402

passed = 0
failed = 0


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def row(text, contender):
    """The table line whose contender column starts with CONTENDER."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[2].startswith(contender):
            return cells
    raise AssertionError(f"no row for '{contender}' in:\n{text}")


ENV = {"type": "env", "cpu_model": "Test CPU 9000", "cpu_vendor": "TestVendor", "cpus": 2,
       "threads_per_core": "1", "avx512_bf16": True, "amx": [], "date_utc": "2026-01-01 00:00 UTC",
       "halo_commit": "abc123", "versions": {"torch": "2.2.1", "dgl": "2.1.0",
                                             "torch_geometric": None},
       "threads": 2, "rounds": 2, "epochs": 3, "python": "/x/python"}


def rec(rnd, bench, run, **kw):
    return {"type": "run", "round": rnd, "bench": bench, "run": run, "rss_mb": 100.0 * rnd, **kw}


def test_table_ratios_and_targets():
    recs = [ENV,
            # GCN: DGL 5x and 6x halo's epoch: median 5.5x, target >= 4.5x met.
            rec(1, "gcn", "halo-fp32", epoch_s=1.0, final_loss=3.0),
            rec(1, "gcn", "halo-bf16", epoch_s=0.8, final_loss=3.1),
            rec(1, "gcn", "dgl", epoch_s=5.0, final_loss=3.2),
            rec(2, "gcn", "halo-fp32", epoch_s=2.0, final_loss=2.9),
            rec(2, "gcn", "halo-bf16", epoch_s=2.5, final_loss=3.0),
            rec(2, "gcn", "dgl", epoch_s=12.0, final_loss=3.3),
            {"type": "skip", "bench": "gcn", "run": "pyg", "reason": "not installed: pip it"},
            # GAT: halo's epoch 0.5x DGL's: target <= 0.4x missed.
            rec(1, "gat", "halo", epoch_s=1.0, final_loss=3.0),
            rec(1, "gat", "dgl", epoch_s=2.0, final_loss=3.0),
            rec(2, "gat", "halo", epoch_s=1.0, final_loss=3.0),
            rec(2, "gat", "dgl", error="exit status 1: boom (see x.err)")]
    text = headline.table(recs)
    check(text.startswith("**CPU:** Test CPU 9000 (TestVendor)"), text.splitlines()[0])
    check("torch_geometric not installed" in text and "dgl 2.1.0" in text, "versions line")
    dgl = row(text, "DGL 2.1.0 GraphConv")
    check(dgl[3] == "8.500 s" and "5.50x faster" in dgl[6] and dgl[8] == "yes", dgl)
    bf16 = row(text, "halo, `--matmul-precision bf16`")
    # Per-round speed-ups 1.25 and 0.8: median 1.025 (not the ratio of medians, 1.5/1.65).
    check("1.02x speed-up" in bf16[6] and bf16[8] == "yes", bf16)
    pyg = row(text, "PyG")
    check(pyg[3] == "not installed: pip it", pyg)
    gat = row(text, "DGL 2.1.0 GATConv")
    # Round 2's DGL failed: only round 1 compares; the row says one run failed.
    check("(1 of 2 runs failed)" in gat[3] and "0.50x" in gat[6] and gat[8] == "no", gat)
    check("TGN" not in text.split("| benchmark")[1].split("\n\n")[0], "tgn not selected")


def test_table_tgn_and_unrun_bf16():
    env = dict(ENV, avx512_bf16=False)
    recs = [env,
            {"type": "skip", "bench": "gcn", "run": "halo-bf16",
             "reason": "n/a: this CPU has no avx512_bf16"},
            rec(1, "gcn", "halo-fp32", epoch_s=1.0, final_loss=3.0),
            rec(1, "tgn", "halo", events_per_s=30000.0, test_ap=0.80),
            rec(1, "tgn", "pyg", events_per_s=10000.0, test_ap=0.805)]
    text = headline.table(recs)
    check("AVX-512 BF16: no" in text, "flag line")
    check(row(text, "halo, `--matmul-precision")[3].startswith("n/a: this CPU"), "bf16 row")
    tgn = row(text, "PyG TGN")
    check(tgn[3] == "10,000 events/s" and tgn[5] == "AP 0.8050", tgn)
    check("3.00x PyG's events/s, test AP -0.0050" in tgn[6] and tgn[8] == "yes", tgn)
    recs[-1]["test_ap"] = 0.83  # halo 0.03 below: AP not unchanged
    check(row(headline.table(recs), "PyG TGN")[8] == "no", "AP tolerance")


def test_run_records_result_and_failure():
    with tempfile.TemporaryDirectory() as d:
        jsonl, result = os.path.join(d, "h.jsonl"), os.path.join(d, "r.json")
        with open(result, "w") as f:
            f.write("not json\n")
            f.write(json.dumps({"epoch_time_median_s": 0.5, "final_loss": 2.5}) + "\n")
        base = [sys.executable, os.path.join(BENCH, "headline.py"), "run", jsonl, "--round", "1",
                "--bench", "gcn", "--run", "dgl", "--out", os.path.join(d, "x")]
        r = subprocess.run(base + ["--parse", f"peer-json:{result}", "--", "true"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, r.stderr)
        r = subprocess.run(base + ["--parse", f"peer-json:{result}", "--", "sh", "-c",
                                   "echo bad dataset >&2; exit 3"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "a failing contender does not end the benchmark")
        got = [json.loads(line) for line in open(jsonl)]
        check(got[0]["epoch_s"] == 0.5 and got[0]["final_loss"] == 2.5 and "error" not in got[0],
              got[0])
        check(got[1]["error"].startswith("exit status 3: bad dataset"), got[1])


def test_script_refusals():
    script = os.path.join(BENCH, "headline.sh")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([script, d], env={**os.environ, "BIN": os.path.join(d, "nobin")},
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "no halo executable at" in r.stderr
              and len(r.stderr.strip().splitlines()) == 1, r.stderr)
        check(not os.path.exists(os.path.join(d, "headline.jsonl")), "nothing written")
        fake = os.path.join(d, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "halo"), "w") as f:
            f.write("#!/bin/sh\nexit 9\n")
        os.chmod(os.path.join(fake, "halo"), 0o755)
        r = subprocess.run([script, d], env={**os.environ, "BIN": fake, "HEADLINE_ONLY": "gcn,xyz"},
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "unknown benchmark 'xyz'" in r.stderr, r.stderr)
        r = subprocess.run([script, d, "0"], env={**os.environ, "BIN": fake},
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "ROUNDS and EPOCHS" in r.stderr, r.stderr)


def test_halo_alone():
    """With HALO_BINARY (ctest sets it): TGN only, one round of one epoch, no peers installed."""
    halo = os.environ.get("HALO_BINARY")
    if not halo:
        print("     (test_halo_alone: no HALO_BINARY, skipped)")
        return
    script = os.path.join(BENCH, "headline.sh")
    with tempfile.TemporaryDirectory() as d:
        # Passive OpenMP waits: the test may share the cores with others (docs/BENCHMARKS.md).
        env = {**os.environ, "BIN": os.path.dirname(os.path.abspath(halo)),
               "PYTHON": os.path.join(d, "no-python"), "HEADLINE_ONLY": "tgn",
               "OMP_WAIT_POLICY": "passive"}
        r = subprocess.run([script, d, "1", "1"], env=env, capture_output=True, text=True,
                           timeout=300)
        check(r.returncode == 0, r.stderr)
        with open(os.path.join(d, "headline.md")) as f:
            check(f.read() == r.stdout, "headline.md is the table printed")
        halo_row = row(r.stdout, "halo TGN")
        check(halo_row[3].endswith("events/s") and halo_row[5].startswith("AP 0."), halo_row)
        check(row(r.stdout, "PyG TGN")[3].startswith("not installed: python3 -m venv"), r.stdout)
        check("GCN" not in r.stdout and "GAT" not in r.stdout, "only TGN selected")
        recs = [json.loads(line) for line in open(os.path.join(d, "headline.jsonl"))]
        check([x["type"] for x in recs] == ["env", "skip", "run"], recs)
        check('"run": "halo"' in r.stderr, "per-run lines on stderr")


def test_peer_gcn_argument_errors():
    script = os.path.join(BENCH, "peer_gcn.py")
    for args, what in ((["ds", "--framework", "mxnet", "--epochs", "1", "--threads", "1"],
                        "invalid choice: 'mxnet'"),
                       (["ds", "--framework", "dgl", "--epochs", "0", "--threads", "1"],
                        "--epochs, --threads and --hidden must be >= 1"),
                       (["ds", "--framework", "pyg", "--epochs", "1"],
                        "the following arguments are required: --threads")):
        r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 2 and what in r.stderr, r.stderr)


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        try:
            fn()
            passed += 1
            print(f"ok   {name}")
        except Exception:  # noqa: BLE001 - report every test
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
