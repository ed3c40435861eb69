"""Arrays -> halo.write_dataset -> halo.Dataset.open give the same graph, features, labels and
splits, from NumPy, SciPy, PyTorch, PyG and DGL; opening maps, it does not copy."""
import os
import resource
import time

import numpy as np
import pytest
import scipy.sparse as sp

import halo

rng = np.random.default_rng(7)


def simple_symmetric(n, ei):
    """What the stored adjacency must be: symmetrised, no self-loops, duplicates merged."""
    a = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.float32).tolil()
    a.setdiag(0)
    a = a.tocsr()
    a.eliminate_zeros()
    a.sort_indices()
    return a


def random_graph(n=50, m=200):
    ei = rng.integers(0, n, size=(2, m))
    ei[:, :3] = [[1, 1, 2], [1, 2, 1]]  # a self-loop and a duplicate in both directions
    return ei


def test_numpy_round_trip(tmp_path):
    n = 50
    ei = random_graph(n)
    x = rng.normal(size=(n, 8)).astype(np.float64)  # narrowed to float32 on disk
    y = rng.integers(0, 4, size=n).astype(np.float64)
    y[5] = np.nan  # missing
    perm = rng.permutation(n)
    splits = {"random": {"train": perm[:20], "valid": perm[20:35], "test": perm[35:]}}
    d = halo.write_dataset(tmp_path / "g", edge_index=ei, x=x, y=y, splits=splits, name="g")
    want = simple_symmetric(n, ei)
    assert d.num_nodes == n and d.num_edges == want.nnz and not d.directed
    np.testing.assert_array_equal(d.offsets, want.indptr)
    np.testing.assert_array_equal(d.indices, want.indices)
    np.testing.assert_array_equal(d.features, x.astype(np.float32))
    assert d.features.dtype == np.float32 and d.features.shape == (n, 8)
    assert d.label_kind == "multiclass" and d.num_classes == int(np.nanmax(y)) + 1
    assert d.labels[5, 0] == -1
    np.testing.assert_array_equal(d.labels[:, 0], np.where(np.isnan(y), -1, y))
    for part in ("train", "valid", "test"):
        np.testing.assert_array_equal(np.sort(d.splits["random"][part]),
                                      np.sort(splits["random"][part]))
    reopened = halo.Dataset.open(tmp_path / "g", validate=True)
    assert reopened.meta["fingerprint"] == d.meta["fingerprint"]
    assert (d.to_scipy() != want).nnz == 0


def test_one_split_given_flat_is_split_random(tmp_path):
    n = 30
    mask = np.zeros(n, dtype=bool)
    mask[:10] = True
    flat = {"test": np.arange(20, 30), "train": mask, "valid": list(range(10, 20))}
    d = halo.write_dataset(tmp_path / "g", edge_index=random_graph(n), splits=flat)
    assert list(d.splits) == ["random"]
    np.testing.assert_array_equal(d.splits["random"]["train"], np.arange(10))
    np.testing.assert_array_equal(d.splits["random"]["valid"], np.arange(10, 20))
    np.testing.assert_array_equal(d.splits["random"]["test"], np.arange(20, 30))
    # A split named "train" (a mapping under the key) is still a named split.
    named = {"train": {"train": mask, "valid": np.arange(10, 20), "test": np.arange(20, 30)}}
    d = halo.write_dataset(tmp_path / "h", edge_index=random_graph(n), splits=named)
    assert list(d.splits) == ["train"]


def test_scipy_and_csr_inputs_give_the_same_dataset(tmp_path):
    n = 40
    ei = random_graph(n, 150)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    a = halo.write_dataset(tmp_path / "a", edge_index=ei, x=x)
    m = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).tocsr()
    b = halo.write_dataset(tmp_path / "b", csr=m, x=x)
    c = halo.write_dataset(tmp_path / "c", csr=(m.indptr, m.indices), x=x)
    for other in (b, c):
        np.testing.assert_array_equal(other.offsets, a.offsets)
        np.testing.assert_array_equal(other.indices, a.indices)
        np.testing.assert_array_equal(other.features, a.features)


def test_multilabel_and_directed_and_weights(tmp_path):
    n = 30
    ei = random_graph(n, 80)
    y = rng.integers(0, 2, size=(n, 5)).astype(np.float32)
    y[3, 2] = np.nan
    w = rng.uniform(1, 2, size=ei.shape[1]).astype(np.float32)
    d = halo.write_dataset(tmp_path / "d", edge_index=ei, y=y, edge_weight=w, directed=True)
    assert d.directed and d.label_kind == "multilabel" and d.labels.shape == (n, 5)
    assert d.labels[3, 2] == -1
    assert d.edge_weights is not None and d.edge_weights.dtype == np.float32
    want = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).tolil()
    want.setdiag(0)
    want = want.tocsr()
    want.eliminate_zeros()
    want.sort_indices()
    np.testing.assert_array_equal(d.indices, want.indices)


def test_views_read_as_numpy_reads_them(cora):
    """Every view is C-ordered with NumPy's strides and reads the stored values, under NumPy 1
    and 2 alike (ctest python.numpy2.*: with pybind11 < 2.12 every stride was 0 under NumPy 2)."""
    d = halo.Dataset.open(cora)
    views = [d.offsets, d.indices, d.features, d.labels] + \
        [ids for split in d.splits.values() for ids in split.values()]
    for v in views:
        assert v.strides == np.ascontiguousarray(v).strides == \
            tuple(v.itemsize * int(np.prod(v.shape[i + 1:])) for i in range(v.ndim)), v.strides
        assert v.flags.c_contiguous and not v.flags.writeable
    assert d.offsets[0] == 0 and d.offsets[-1] == d.num_edges == len(d.indices)
    assert np.all(np.diff(d.offsets) >= 0) and d.indices.max() == d.num_nodes - 1
    assert len(np.unique(d.features.sum(axis=1))) > 10  # rows differ: not one row repeated
    assert d.labels.min() == 0 and d.labels.max() == d.num_classes - 1
    ei = d.edge_index()
    assert ei.shape == (2, d.num_edges) and set(ei[0]) == set(range(d.num_nodes))
    np.testing.assert_array_equal(d.to_scipy().toarray(), d.to_scipy().toarray().T)


def test_views_are_read_only_and_outlive_the_dataset(tmp_path):
    d = halo.write_dataset(tmp_path / "r", edge_index=random_graph(), x=np.ones((50, 2)))
    f = d.features
    with pytest.raises(ValueError):
        f[0, 0] = 2
    del d
    assert float(f.sum()) == 100.0  # the mapping stays while a view lives


def test_opening_maps_without_reading_the_features(tmp_path):
    """Zero-copy: a 200,000 x 128 float32 feature matrix (~100 MB) opens in well under a second
    and touches none of its pages."""
    halo.generate(tmp_path / "big", nodes=200000, avg_degree=4, features=128, classes=4)
    with open("/proc/self/statm") as f:
        page = os.sysconf("SC_PAGE_SIZE")
        before = int(f.read().split()[1]) * page
    t = time.perf_counter()
    d = halo.Dataset.open(tmp_path / "big")
    seconds = time.perf_counter() - t
    with open("/proc/self/statm") as f:
        grown = int(f.read().split()[1]) * page - before
    assert d.features.shape == (200000, 128)
    assert seconds < 0.5, seconds
    assert grown < d.features.nbytes / 10, grown
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


def test_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    n = 20
    ei = torch.from_numpy(random_graph(n, 60))
    x = torch.randn(n, 4)
    y = torch.randint(0, 3, (n,))
    d = halo.write_dataset(tmp_path / "t", edge_index=ei, x=x, y=y)
    np.testing.assert_array_equal(d.features, x.numpy())
    np.testing.assert_array_equal(d.labels[:, 0], y.numpy())


def test_pyg_round_trip(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    pyg = pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed")
    from torch_geometric.utils import to_undirected
    n = 30
    ei = to_undirected(torch.from_numpy(random_graph(n, 90)))
    mask = torch.zeros(n, dtype=torch.bool)
    data = pyg.data.Data(edge_index=ei, x=torch.randn(n, 5), y=torch.randint(0, 3, (n,)),
                         train_mask=mask.clone().index_fill_(0, torch.arange(10), True),
                         val_mask=mask.clone().index_fill_(0, torch.arange(10, 20), True),
                         test_mask=mask.clone().index_fill_(0, torch.arange(20, 30), True))
    d = halo.from_pyg(data, tmp_path / "p")
    back = d.to_pyg()
    assert torch.equal(back.x, data.x) and torch.equal(back.y, data.y)
    assert torch.equal(back.train_mask, data.train_mask)
    got = set(map(tuple, back.edge_index.t().tolist()))
    want = set(map(tuple, ei.t().tolist())) - {(u, u) for u in range(n)}
    assert got == want


def test_dgl_round_trip(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    dgl = pytest.importorskip("dgl", reason="DGL is not installed")
    n = 25
    ei = random_graph(n, 70)
    g = dgl.to_bidirected(dgl.graph((torch.from_numpy(ei[0]), torch.from_numpy(ei[1])),
                                    num_nodes=n))
    g.ndata["feat"] = torch.randn(n, 3)
    g.ndata["label"] = torch.randint(0, 2, (n,))
    d = halo.from_dgl(g, tmp_path / "g")
    back = d.to_dgl()
    assert torch.equal(back.ndata["feat"], g.ndata["feat"])
    assert back.num_edges() == g.num_edges() - int((g.edges()[0] == g.edges()[1]).sum())
