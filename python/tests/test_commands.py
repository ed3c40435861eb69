"""The commands from Python run the CLI's code: the same summary, predictions and partition
report as the halo executable with the same flags; errors carry the CLI's line."""
import json
import os

import numpy as np
import pytest

import halo
from conftest import cli

FLAGS = dict(preset="planetoid-gcn", epochs=30, seed=3, threads=1)
CLI_FLAGS = ["--preset", "planetoid-gcn", "--epochs", "30", "--seed", "3", "--threads", "1"]


def records(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def losses(log):
    return [r["loss"] for r in records(log) if r.get("type") == "epoch"]


def test_train_gives_the_clis_summary_and_predictions(cora, tmp_path):
    got, pred = halo.train(cora, predictions=True, log=str(tmp_path / "py.jsonl"), **FLAGS)
    cli("train", cora, *CLI_FLAGS, "--log", tmp_path / "log.jsonl",
        "--predictions-out", tmp_path / "pred.npy")
    want = records(tmp_path / "log.jsonl")[-1]
    assert got["type"] == "summary"
    for key in ("test_mean", "valid_mean", "runs", "metric"):
        assert got[key] == want[key], key
    assert len(losses(tmp_path / "log.jsonl")) == 30
    assert losses(tmp_path / "py.jsonl") == losses(tmp_path / "log.jsonl")  # bit for bit
    np.testing.assert_array_equal(pred, np.load(tmp_path / "pred.npy"))
    assert pred.shape == (2708,) and pred.dtype == np.int64


def test_train_prints_nothing_unless_verbose(cora, capfd):
    # The CLI's lines come from C++ (std::cout on fd 1): capfd sees them, capsys would not.
    quiet = halo.train(cora, **dict(FLAGS, epochs=3))
    out = capfd.readouterr().out
    assert out == "", out
    loud = halo.train(cora, verbose=True, **dict(FLAGS, epochs=3))
    out = capfd.readouterr().out
    assert out.count("epoch ") >= 3 and "valid" in out and "test" in out, out
    assert quiet["test_mean"] == loud["test_mean"]
    halo.run("train", cora, "--epochs", 1, "--threads", 1)  # halo.run prints as the CLI does
    assert "epoch" in capfd.readouterr().out
    with pytest.raises(halo.ParamError):  # a refused command leaves stdout as it found it
        halo.train(cora, hidden=0)
    halo.run("train", cora, "--epochs", 1, "--threads", 1)
    assert "epoch" in capfd.readouterr().out


def test_partition_and_predict_on_parts_agree_with_the_cli(cora, tmp_path):
    report = halo.partition(cora, 2, tmp_path / "py-2")
    cli("partition", cora, "-k", "2", "-o", tmp_path / "cli-2")
    with open(tmp_path / "cli-2" / "meta.json") as f:
        want = json.load(f)
    assert report["k"] == 2 and len(report["parts"]) == 2 and report["edge_cut"] > 0
    for key in ("edge_cut", "comm_volume", "balance", "parts", "fingerprint"):
        assert report[key] == want[key], key
    halo.train(cora, checkpoint=str(tmp_path / "ck"), **FLAGS)
    pred, emb = halo.predict(cora, str(tmp_path / "ck"), embeddings=True)
    cli("predict", cora, "--checkpoint", tmp_path / "ck", "-o", tmp_path / "p.npy",
        "--embeddings-out", tmp_path / "e.npy")
    np.testing.assert_array_equal(pred, np.load(tmp_path / "p.npy"))
    np.testing.assert_array_equal(emb, np.load(tmp_path / "e.npy"))
    assert emb.dtype == np.float32 and emb.shape == (2708, 16)


def test_errors_carry_the_clis_line(cora, tmp_path):
    with pytest.raises(halo.ParamError) as e:
        halo.train(cora, hidden=0)
    r = cli("train", cora, "--hidden", "0", check=False)
    assert r.returncode == 2
    assert r.stderr.strip() == "error: " + str(e.value)
    with pytest.raises(halo.InputError) as e:
        halo.Dataset.open(tmp_path / "nowhere")
    assert "nowhere" in str(e.value)
    with pytest.raises(halo.ParamError) as e:
        halo.run("trian")
    assert "unknown command 'trian'" in str(e.value)
    assert isinstance(e.value, halo.Error)


def test_tgn_train_returns_the_summary(tmp_path, capfd):
    from conftest import SOURCE
    halo.convert(os.path.join(SOURCE, "datasets", "uci-messages", "graph.txt"), tmp_path / "uci",
                 format="konect")
    capfd.readouterr()
    s = halo.tgn.train(tmp_path / "uci", model="edgebank")
    assert s["type"] == "summary" and 0.5 < s["test_ap"] <= 1.0
    assert capfd.readouterr().out == ""
    halo.tgn.train(tmp_path / "uci", model="edgebank", verbose=True)
    assert "epoch" in capfd.readouterr().out
