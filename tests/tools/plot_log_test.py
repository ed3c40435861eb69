#!/usr/bin/python3
"""Tests tools/plot-log.py end to end (plain script, no pytest).

    /usr/bin/python3 tests/tools/plot_log_test.py

Runs plot-log.py with the interpreter running this test (Debian's python3 with
python3-matplotlib). Exit status 0 when all pass; the last line is "N passed, N failed".
"""

import json
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "tools", "plot-log.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

passed = 0
failed = 0


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run_plot(log, out):
    return subprocess.run([sys.executable, SCRIPT, log, "-o", out],
                          capture_output=True, text=True, timeout=120)


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def epoch_records(runs=2, epochs=5, breakdown=True):
    recs = [{"type": "config", "model": "gcn", "layers": 3}]
    for run in range(runs):
        for e in range(1, epochs + 1):
            r = {"type": "epoch", "run": run, "epoch": e, "loss": 2.0 / e + 0.1 * run,
                 "train": 0.5 + 0.08 * e, "valid": 0.4 + 0.07 * e, "test": 0.41 + 0.07 * e,
                 "epoch_time_s": 0.010 + 0.001 * (e % 2)}
            if breakdown:
                r.update(compute_s=0.007, halo_wait_s=0.002, allreduce_s=0.001 + 0.001 * (e % 2))
            recs.append(r)
    recs.append({"type": "summary", "metric": "acc", "valid_mean": 0.75, "valid_std": 0.01,
                 "test_mean": 0.76, "test_std": 0.012, "runs": runs,
                 "epoch_time_median_s": 0.0105, "peak_rss_mb": 123.4})
    return recs


def assert_png(path):
    check(os.path.isfile(path), f"{path} was not written")
    size = os.path.getsize(path)
    check(size > 0, f"{path} is empty")
    with open(path, "rb") as f:
        check(f.read(8) == PNG_SIGNATURE, f"{path} does not start with the PNG signature")


def assert_no_leftovers(d, allowed):
    extra = sorted(set(os.listdir(d)) - set(allowed))
    check(not extra, f"unexpected files left in {d}: {extra}")


def assert_fails(d, log, expect_in_message):
    out = os.path.join(d, "out.png")
    r = run_plot(log, out)
    check(r.returncode == 1, f"exit status {r.returncode}, expected 1 (stderr: {r.stderr!r})")
    msg = r.stderr.strip()
    check(msg.count("\n") == 0 and msg, f"expected a one-line message, got {r.stderr!r}")
    for s in expect_in_message:
        check(s in msg, f"message {msg!r} lacks {s!r}")
    check(not os.path.exists(out), "output PNG written despite the error")
    check(not any(n.endswith(".png") for n in os.listdir(d)), "a temporary PNG was left behind")
    return msg


# ---------------------------------------------------------------- tests

def test_multi_run_with_breakdown(d):
    log = os.path.join(d, "train.jsonl")
    write_lines(log, epoch_records(runs=2, epochs=5, breakdown=True))
    out = os.path.join(d, "curves.png")
    r = run_plot(log, out)
    check(r.returncode == 0, f"exit status {r.returncode}: {r.stderr}")
    assert_png(out)
    assert_no_leftovers(d, ["train.jsonl", "curves.png"])


def test_single_run_no_breakdown_no_summary_unknown_types(d):
    recs = [r for r in epoch_records(runs=1, epochs=3, breakdown=False) if r["type"] != "summary"]
    recs.insert(2, {"type": "checkpoint", "path": "/x"})
    log = os.path.join(d, "single.jsonl")
    write_lines(log, recs + [""])        # a blank line is skipped
    out = os.path.join(d, "single.png")
    r = run_plot(log, out)
    check(r.returncode == 0, f"exit status {r.returncode}: {r.stderr}")
    assert_png(out)


def test_single_epoch(d):
    log = os.path.join(d, "one.jsonl")
    write_lines(log, epoch_records(runs=1, epochs=1, breakdown=True))
    out = os.path.join(d, "one.png")
    r = run_plot(log, out)
    check(r.returncode == 0, f"exit status {r.returncode}: {r.stderr}")
    assert_png(out)


def test_replaces_existing_output(d):
    log = os.path.join(d, "train.jsonl")
    write_lines(log, epoch_records(runs=1, epochs=4))
    out = os.path.join(d, "curves.png")
    with open(out, "wb") as f:
        f.write(b"old")
    r = run_plot(log, out)
    check(r.returncode == 0, f"exit status {r.returncode}: {r.stderr}")
    assert_png(out)


def test_invalid_json_line(d):
    recs = epoch_records(runs=1, epochs=3)
    lines = [json.dumps(r) for r in recs]
    lines.insert(2, '{"type": "epoch", "epoch": 3, "loss": ')   # line 3 is truncated
    log = os.path.join(d, "broken.jsonl")
    write_lines(log, lines)
    assert_fails(d, log, ["broken.jsonl", ":3:"])


def test_invalid_json_keeps_existing_output(d):
    log = os.path.join(d, "broken.jsonl")
    write_lines(log, ["not json at all"])
    out = os.path.join(d, "keep.png")
    with open(out, "wb") as f:
        f.write(b"previous")
    r = run_plot(log, out)
    check(r.returncode == 1, f"exit status {r.returncode}, expected 1")
    check("broken.jsonl:1:" in r.stderr, f"message {r.stderr!r} lacks file:line")
    with open(out, "rb") as f:
        check(f.read() == b"previous", "existing output was modified on error")


def test_non_object_line(d):
    log = os.path.join(d, "array.jsonl")
    write_lines(log, [json.dumps(epoch_records(1, 1)[1]), "[1, 2, 3]"])
    assert_fails(d, log, ["array.jsonl", ":2:"])


def test_missing_file(d):
    assert_fails(d, os.path.join(d, "nope.jsonl"), ["nope.jsonl"])


def test_no_epoch_records(d):
    log = os.path.join(d, "empty.jsonl")
    write_lines(log, [{"type": "config"}, epoch_records(1, 1)[-1]])
    assert_fails(d, log, ["empty.jsonl", "no epoch records"])


def test_empty_file(d):
    log = os.path.join(d, "zero.jsonl")
    open(log, "w").close()
    assert_fails(d, log, ["zero.jsonl"])


def main():
    global passed, failed
    if not os.path.isfile(SCRIPT):
        print(f"plot_log_test: {SCRIPT} not found", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    tests = [(name, fn) for name, fn in globals().items()
             if name.startswith("test_") and callable(fn)]
    for name, fn in tests:
        with tempfile.TemporaryDirectory(prefix="plot_log_test.") as d:
            try:
                fn(d)
                passed += 1
                print(f"PASS {name}")
            except Exception:
                failed += 1
                print(f"FAIL {name}")
                traceback.print_exc(file=sys.stdout)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
