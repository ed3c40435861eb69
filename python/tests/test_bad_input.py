"""Bad arrays from Python raise halo.InputError (or ParamError) naming the argument, the entry
and what was expected, and leave nothing behind."""
import os

import numpy as np
import pytest

import halo

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
