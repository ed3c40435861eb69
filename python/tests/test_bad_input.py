"""Bad arrays from Python raise halo.InputError (or ParamError) naming the argument, the entry
and what was expected, and leave nothing behind."""
import os
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest

import halo
from conftest import cli

EI = np.array([[0, 1, 2], [1, 2, 3]])


def refused(tmp_path, error, words, **kwargs):
    kwargs.setdefault("edge_index", EI)
    with pytest.raises(error) as e:
        halo.write_dataset(tmp_path / "out", **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert "\n" not in str(e.value)
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


def test_wrong_dtypes_and_shapes(tmp_path):
    refused(tmp_path, halo.InputError, ["edge_index", "expected numbers"],
            edge_index=np.array([["a", "b"], ["c", "d"]]))
    refused(tmp_path, halo.InputError, ["edge_index: expected shape [2 x edges]"],
            edge_index=np.zeros((3, 4), dtype=np.int64))
    refused(tmp_path, halo.InputError, ["x: expected a [num_nodes x features]"],
            x=np.zeros((3, 2)), num_nodes=4)
    refused(tmp_path, halo.InputError, ["edge_index[0]", "integer node ids"],
            edge_index=np.array([[0.5, 1.0], [1.0, 2.0]]))
    refused(tmp_path, halo.InputError, ["y: expected one label"], y=np.zeros(3), num_nodes=4)
    refused(tmp_path, halo.ParamError, ["give edge_index= or csr="], edge_index=None)


def test_ids_out_of_range(tmp_path):
    refused(tmp_path, halo.InputError, ["edge_index[1][2]: node id 9 outside [0, 4)"],
            edge_index=np.array([[0, 1, 2], [1, 2, 9]]), num_nodes=4)
    refused(tmp_path, halo.InputError, ["edge_index[0][0]: node id -1 outside [0, 4)"],
            edge_index=np.array([[-1], [1]]), num_nodes=4)
    refused(tmp_path, halo.InputError, ["splits['s']['test'][1]: node id 7 outside [0, 4)"],
            splits={"s": {"train": [0], "valid": [1], "test": [2, 7]}})
    refused(tmp_path, halo.InputError, ["splits['s']: missing test"],
            splits={"s": {"train": [0], "valid": [1]}})
    refused(tmp_path, halo.InputError, ["splits['test'][0]: node id 9 outside [0, 4)"],
            splits={"train": [0], "valid": [1], "test": [9]})
    # One split given flat but short of a part: the message shows both shapes.
    refused(tmp_path, halo.InputError,
            ["splits: missing valid, test (one split is {'train': ..., 'valid': ..., 'test': "
             "...}, several are {name: {'train': ..., 'valid': ..., 'test': ...}})"],
            splits={"train": [0, 1]})


def test_non_finite_features_and_bad_labels(tmp_path):
    x = np.ones((4, 3), dtype=np.float32)
    x[2, 1] = np.nan
    refused(tmp_path, halo.InputError, ["x[2][1]: not a finite number"], x=x)
    x[2, 1] = np.inf
    refused(tmp_path, halo.InputError, ["x[2][1]: not a finite number"], x=x)
    refused(tmp_path, halo.InputError, ["y[1]: label -3"], y=np.array([0, -3, 1, 2]))
    refused(tmp_path, halo.InputError, ["y[2]: label 1.5"], y=np.array([0, 1, 1.5, 2]))
    refused(tmp_path, halo.InputError, ["y[0]: label 2, expected 0, 1 or missing"],
            y=np.array([[2, 0], [0, 1], [1, 1], [0, 0]]))
    refused(tmp_path, halo.InputError, ["edge_weight[1]: not a finite number"],
            edge_weight=np.array([1.0, np.nan, 1.0]))


def test_an_existing_output_is_kept(tmp_path):
    halo.write_dataset(tmp_path / "out", edge_index=EI)
    with pytest.raises(halo.ParamError):
        halo.write_dataset(tmp_path / "out", edge_index=EI, x=np.ones((4, 1)))
    assert halo.Dataset.open(tmp_path / "out").features is None
    d = halo.write_dataset(tmp_path / "out", edge_index=EI, x=np.ones((4, 1)), overwrite=True)
    assert d.features.shape == (4, 1)


SPLIT = {"train": [0], "valid": [1], "test": [2]}


def one_line(e, *words):
    """The exception's message is one line holding every word."""
    text = str(e.value)
    assert "\n" not in text and text.strip(), text
    for w in words:
        assert w in text, (w, text)


def test_bad_split_names_are_refused_before_writing(tmp_path):
    """Class 9: a split's name is part of its files' names; a name the reader or the file system
    cannot take is a ParamError before anything is written, not a committed invalid dataset."""
    bad = {"a\x00b": "control character", "a\x1b[31mb": "control character", "": "is empty",
           "/": "contains '/'", "a/b": "contains '/'", ".": "is '.'", "..": "is '..'",
           "x" * 240: "240 bytes long"}
    for name, why in bad.items():
        refused(tmp_path, halo.ParamError, ["splits: the split name", why], splits={name: SPLIT})
    refused(tmp_path, halo.ParamError, ["splits: a split name is a string, got 1"],
            splits={1: SPLIT})
    refused(tmp_path, halo.ParamError, ["is not UTF-8"], splits={"\udc80": SPLIT})
    # escaped in the message: no raw control byte reaches a terminal
    with pytest.raises(halo.ParamError) as e:
        halo.write_dataset(tmp_path / "out", edge_index=EI, splits={"a\x1b[31mb": SPLIT})
    assert "\x1b" not in str(e.value) and "a\\x1b[31mb" in str(e.value)
    # the longest name and any other text are written, and read back by the CLI
    names = ["x" * 239, "öffentlich split-1 (v2)", "..a"]
    halo.write_dataset(tmp_path / "ok", edge_index=EI, splits={n: SPLIT for n in names})
    assert sorted(halo.Dataset.open(tmp_path / "ok", validate=True).splits) == sorted(names)
    cli("info", tmp_path / "ok")


def test_arguments_that_would_be_misread_are_refused(tmp_path):
    """Class 10: masks of another length, unknown split keys, two graphs, a fractional node
    count and ids beyond int64 were accepted or misreported; each is refused in one line."""
    for mask in (np.array([True, False]), np.ones(5, dtype=bool), np.ones((4, 1), dtype=bool)):
        refused(tmp_path, halo.InputError,
                ["splits['s']['train']: a mask of shape %s, expected one entry per node (4)" %
                 list(mask.shape)], splits={"s": dict(SPLIT, train=mask)})
    refused(tmp_path, halo.InputError, ["splits['s']: unknown key 'val' (expected train, valid"],
            splits={"s": dict(SPLIT, val=[3])})
    refused(tmp_path, halo.ParamError, ["give edge_index= or csr=, not both"],
            csr=(np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3])))
    refused(tmp_path, halo.ParamError, ["num_nodes: expected a whole number of nodes, got 4.5"],
            num_nodes=4.5)
    refused(tmp_path, halo.ParamError, ["num_nodes: expected a whole number", "True"],
            num_nodes=True)
    big = np.array([[0, 2**63 + 5], [1, 2]], dtype=np.uint64)
    refused(tmp_path, halo.InputError,
            ["edge_index[0][1]: node id 9223372036854775813 outside [0, 4)"],
            edge_index=big, num_nodes=4)
    refused(tmp_path, halo.InputError,
            ["edge_index[0][1]: node id 9223372036854775813 outside [0, 2147483647)"],
            edge_index=big)
    refused(tmp_path, halo.InputError,
            ["edge_index[1][0]: node id 100000000000000000000 outside [0, 4)"],
            edge_index=np.array([[0.0], [1e20]]), num_nodes=4)
    refused(tmp_path, halo.InputError, ["edge_index[0]: expected node ids, got booleans"],
            edge_index=np.array([[True, False], [False, True]]))
    refused(tmp_path, halo.InputError, ["csr: expected integer offsets"], edge_index=None,
            csr=(np.array([0, 3, 1, 3], dtype=np.uint64), np.array([0, 1, 2])))  # falling
    refused(tmp_path, halo.InputError, ["csr: expected integer offsets"], edge_index=None,
            csr=(np.array([0.0, 1.0]), np.array([0])))
    # a whole float is a count, as before
    assert halo.write_dataset(tmp_path / "ok", edge_index=EI, num_nodes=5.0).num_nodes == 5


def test_every_error_is_a_halo_error(tmp_path):
    """Class 11: values of the right type but out of range or shape raised TypeError,
    ValueError or MemoryError; each is now a halo.Error subclass with one line."""
    refused(tmp_path, halo.ParamError, ["num_nodes: 1180591620717411303424 outside [0, 2^31 - 1]"],
            num_nodes=2**70)
    refused(tmp_path, halo.ParamError, ["num_nodes: -1 outside [0, 2^31 - 1]"], num_nodes=-1)
    refused(tmp_path, halo.ParamError, ["csr: expected a SciPy sparse matrix or an (offsets, "
                                        "indices) pair, got tuple of 3"],
            edge_index=None, csr=(np.array([0, 1]), np.array([0]), np.array([0])))
    refused(tmp_path, halo.ParamError, ["csr: expected", "got int"], edge_index=None, csr=5)
    refused(tmp_path, halo.InputError, ["edge_index: not an array of numbers"],
            edge_index=[[0, 1], [1]])
    refused(tmp_path, halo.ParamError, ["splits: expected {name:", "got list"], splits=[SPLIT])
    refused(tmp_path, halo.InputError, ["splits['s']: expected {'train'", "got list"],
            splits={"s": [[0], [1], [2]]})
    refused(tmp_path, halo.ParamError, ["name: expected a string, got int"], name=5)
    with pytest.raises(halo.ParamError) as e:
        halo.write_dataset(str(tmp_path / "out\x00x"), edge_index=EI)
    one_line(e, "contains a NUL character")
    with pytest.raises(halo.ParamError) as e:
        halo.Dataset.open(str(tmp_path / "out\x00x"))
    one_line(e, "contains a NUL character")
    with pytest.raises(halo.ParamError) as e:  # C would read "info out": another path
        halo.run("info", str(tmp_path / "out\x00x"))
    one_line(e, "contains a NUL character")
    with pytest.raises(halo.ParamError) as e:
        halo.Dataset.open(5)
    one_line(e, "path: expected a str or os.PathLike, got int")
    with pytest.raises(halo.ParamError) as e:
        halo.run("info", None)
    one_line(e, "argument None: expected a str")
    assert os.listdir(tmp_path) == []


def test_too_many_nodes_for_the_memory_is_a_halo_error(tmp_path):
    """Class 11: 2^31 - 1 nodes (32 GiB to build) raised MemoryError: std::bad_alloc. Under a
    4 GiB address-space limit (so a missed check cannot take the machine's memory), it is a
    ParamError before allocating, or where the estimate fits the machine but not the limit,
    SystemError "out of memory"; nothing is written."""
    code = textwrap.dedent("""
        import resource, sys
        import numpy as np
        import halo
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        try:
            halo.write_dataset(sys.argv[1], edge_index=np.array([[0], [1]]), num_nodes=2**31 - 1)
        except halo.Error as e:
            print(type(e).__name__)
            print(e)
            sys.exit(0)
        sys.exit(3)
        """)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=60)
    assert time.monotonic() - t < 10
    assert r.returncode == 0, r.stdout + r.stderr
    kind, message = r.stdout.splitlines()
    if kind == "ParamError":
        assert message.startswith("write_dataset: 2147483647 nodes and 1 edges need about "
                                  "32.00 GiB, but only ") and "check num_nodes" in message, message
    else:
        assert (kind, message) == ("SystemError", "out of memory"), r.stdout
    assert os.listdir(tmp_path) == []


def karate_like():
    """What PyG's KarateClub()[0] holds: 34 nodes, x, y and a train mask only (4 nodes)."""
    rng = np.random.default_rng(1)
    n = 34
    train = np.zeros(n, dtype=bool)
    train[[0, 4, 8, 33]] = True
    return SimpleNamespace(edge_index=rng.integers(0, n, size=(2, 156)), x=np.eye(n),
                           y=rng.integers(0, 4, size=n), train_mask=train, num_nodes=n)


def test_a_dataset_without_a_split(tmp_path):
    """Class 18: a PyG graph with a train mask only wrote no split silently, and halo train then
    said "no split named ''". from_pyg now warns, and train says what is missing and how to
    give it (the CLI's line too); a split asked for by name lists those there are."""
    with pytest.warns(UserWarning, match=r"from_pyg: train_mask without val_mask, test_mask: "
                                         r"no split written"):
        d = halo.from_pyg(karate_like(), tmp_path / "k")
    assert d.splits == {} and d.num_nodes == 34
    with pytest.raises(halo.ParamError) as e:
        halo.train(tmp_path / "k", epochs=1)
    one_line(e, "k: the dataset has no split (train, valid and test node sets)", "splits={")
    r = cli("train", tmp_path / "k", "--epochs", "1", check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr == "error: %s\n" % e.value
    with pytest.raises(halo.ParamError) as e:
        halo.train(tmp_path / "k", split="public", epochs=1)
    one_line(e, "no split named 'public': the dataset has no split")
    # splits= gives one (it used to be a TypeError: from_pyg passed its own)
    data = karate_like()
    rest = np.flatnonzero(~data.train_mask)
    d = halo.from_pyg(data, tmp_path / "k2", splits={"s": {"train": data.train_mask,
                                                         "valid": rest[:10], "test": rest[10:]}})
    assert sorted(d.splits["s"]["train"]) == [0, 4, 8, 33]
    with pytest.raises(halo.ParamError) as e:
        halo.train(tmp_path / "k2", split="random", epochs=1)
    one_line(e, "k2: no split named 'random' (it has s)")
    assert halo.train(tmp_path / "k2", epochs=1)["type"] == "summary"
    for to in (d.to_pyg, d.to_dgl):  # a split that is not there is not "no masks"
        with pytest.raises(halo.ParamError) as e:
            to("random")
        one_line(e, "k2: no split named 'random' (it has s)")


def test_pyg_karate_club(tmp_path):
    """The same with PyG's own KarateClub, where PyG is installed."""
    pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed")
    from torch_geometric.datasets import KarateClub
    with pytest.warns(UserWarning, match="train_mask without val_mask, test_mask"):
        halo.from_pyg(KarateClub()[0], tmp_path / "k")
    with pytest.raises(halo.ParamError, match="the dataset has no split"):
        halo.train(tmp_path / "k", epochs=1)
