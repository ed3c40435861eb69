"""Native datasets from and to NumPy, SciPy, PyTorch, PyG and DGL."""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from . import _halo

if TYPE_CHECKING:  # only for the annotations: none of these is imported at run time
    import dgl
    import scipy.sparse
    import torch_geometric.data

PathLike = Union[str, "os.PathLike[str]"]
ArrayLike = Any  # a NumPy array, a torch tensor or a (nested) list of numbers


class Dataset:
    """A native dataset (``halo convert``'s output), its arrays read-only NumPy views of the
    mapped files: opening copies nothing, pages are read as they are touched.

    Attributes: ``path``, ``name``, ``num_nodes``, ``num_edges`` (stored, both directions of
    an undirected edge), ``directed``, ``offsets`` and ``indices`` (the CSR; ``csr`` is the
    pair), ``edge_weights``, ``features`` (float32 [nodes x F] or None), ``labels`` (int32
    [nodes x C], -1 = missing, or None), ``label_kind`` ("multiclass", "multilabel", "none"),
    ``num_classes``, ``splits`` (``splits["public"]["train"]``: int32 node ids),
    ``original_ids`` (after ``halo reorder``: each node's id in the input) and ``meta``
    (meta.json).
    """

    num_nodes: int
    num_edges: int
    directed: bool
    name: str
    offsets: np.ndarray
    indices: np.ndarray
    edge_weights: Optional[np.ndarray]
    features: Optional[np.ndarray]
    labels: Optional[np.ndarray]
    label_kind: str
    num_classes: int
    splits: Dict[str, Dict[str, np.ndarray]]
    original_ids: Optional[np.ndarray]
    meta: Dict[str, Any]

    def __init__(self, path: PathLike, arrays: Mapping[str, Any]) -> None:
        self.path = os.fspath(path)
        for key, value in arrays.items():
            setattr(self, key, value)
        with open(os.path.join(self.path, "meta.json")) as f:
            self.meta = json.load(f)

    @classmethod
    def open(cls, path: PathLike, *, validate: bool = False) -> "Dataset":
        """Maps the dataset at ``path``. ``validate=True`` also runs the structure checks halo
        train runs (ids, symmetry, finite features, labels, splits, checksums), which read every
        page; without it meta.json and every array's size are checked."""
        return cls(path, _halo.open_dataset(os.fspath(path), validate))

    @property
    def csr(self) -> Tuple[np.ndarray, np.ndarray]:
        """(offsets, indices): row u's neighbours are ``indices[offsets[u]:offsets[u + 1]]``."""
        return self.offsets, self.indices

    def edge_index(self) -> np.ndarray:
        """The stored edges as an int64 [2 x num_edges] array (PyG's layout; a copy)."""
        rows = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(self.offsets))
        return np.stack([rows, self.indices.astype(np.int64)])

    def to_scipy(self) -> "scipy.sparse.csr_matrix":
        """The adjacency as a ``scipy.sparse.csr_matrix`` (the edge weights, or ones). SciPy
        copies the index arrays into one index dtype: ~2.3 s and 0.5 GiB at ogbn-products
        size, where opening takes milliseconds."""
        import scipy.sparse as sp
        data = self.edge_weights if self.edge_weights is not None else \
            np.ones(self.num_edges, dtype=np.float32)
        return sp.csr_matrix((data, self.indices, self.offsets),
                             shape=(self.num_nodes, self.num_nodes))

    def _masks(self, split: Optional[str]) -> Dict[str, np.ndarray]:
        masks: Dict[str, np.ndarray] = {}
        for part, ids in self.splits.get(split or "", {}).items():
            m = np.zeros(self.num_nodes, dtype=bool)
            m[ids] = True
            masks[part] = m
        return masks

    def _y(self) -> Optional[np.ndarray]:
        if self.labels is None:
            return None
        if self.label_kind == "multiclass":
            return self.labels[:, 0].astype(np.int64)
        return self.labels.astype(np.float32)  # multi-label: -1 stays for missing

    def to_pyg(self, split: Optional[str] = None) -> "torch_geometric.data.Data":
        """A ``torch_geometric.data.Data`` (x, edge_index, y, train/val/test masks of ``split``,
        default the first), copying the arrays into tensors."""
        import torch
        from torch_geometric.data import Data
        split = split or next(iter(self.splits), None)
        data = Data(edge_index=torch.from_numpy(self.edge_index()), num_nodes=self.num_nodes)
        if self.features is not None:
            data.x = torch.from_numpy(np.array(self.features))
        y = self._y()
        if y is not None:
            data.y = torch.from_numpy(y)
        for part, m in self._masks(split).items():
            setattr(data, {"valid": "val"}.get(part, part) + "_mask", torch.from_numpy(m))
        return data

    def to_dgl(self, split: Optional[str] = None) -> "dgl.DGLGraph":
        """A ``dgl.DGLGraph`` with ndata feat, label and train/val/test_mask of ``split``."""
        import dgl
        import torch
        split = split or next(iter(self.splits), None)
        ei = self.edge_index()
        g = dgl.graph((torch.from_numpy(ei[0]), torch.from_numpy(ei[1])),
                      num_nodes=self.num_nodes)
        if self.features is not None:
            g.ndata["feat"] = torch.from_numpy(np.array(self.features))
        y = self._y()
        if y is not None:
            g.ndata["label"] = torch.from_numpy(y)
        for part, m in self._masks(split).items():
            g.ndata[{"valid": "val"}.get(part, part) + "_mask"] = torch.from_numpy(m)
        return g

    def __repr__(self) -> str:
        return "halo.Dataset(%r: %d nodes, %d stored edges, %s features, %s)" % (
            self.path, self.num_nodes, self.num_edges,
            self.features.shape[1] if self.features is not None else 0, self.label_kind)


def _numpy(value: ArrayLike, what: str) -> Any:
    """value (NumPy, a torch tensor, a list) as a NumPy array."""
    if value is None:
        return None
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise _halo.InputError("%s: expected numbers, got an array of %s" % (what, a.dtype))
    return a


def _ids(value: ArrayLike, what: str) -> np.ndarray:
    a = _numpy(value, what)
    if a.dtype.kind == "b":  # a mask
        if a.ndim != 1:
            raise _halo.InputError("%s: expected a 1-D mask or id array" % what)
        return np.flatnonzero(a).astype(np.int64)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            raise _halo.InputError("%s: expected integer node ids, got %s values" % (what, a.dtype))
    return np.ascontiguousarray(a, dtype=np.int64)


def _labels(y: ArrayLike) -> Tuple[np.ndarray, bool]:
    """y as int32 [n x C] with -1 for missing, and whether it is multi-label."""
    a = _numpy(y, "y")
    multilabel = a.ndim == 2 and a.shape[1] > 1
    if a.ndim == 1:
        a = a[:, None]
    if a.dtype.kind == "f":
        bad = np.isfinite(a) & (a != np.floor(a))
        if np.any(bad) or np.any(np.isinf(a)):
            r = np.argwhere(bad | np.isinf(a))[0]
            raise _halo.InputError("y[%d]: label %s, expected an integer or NaN (missing)" %
                                   (r[0], a[tuple(r)].item()))
        missing = np.isnan(a)
        a = np.where(missing, -1, a)
    if a.size and (a.max() > np.iinfo(np.int32).max or a.min() < -1):
        r = np.argwhere((a > np.iinfo(np.int32).max) | (a < -1))[0]
        raise _halo.InputError("y[%d]: label %s, expected a class id >= 0 or missing (NaN, -1)" %
                               (r[0], a[tuple(r)].item()))
    return np.ascontiguousarray(a, dtype=np.int32), multilabel


def write_dataset(path: PathLike, *, edge_index: Any = None, csr: Any = None,
                  x: ArrayLike = None, y: ArrayLike = None,
                  splits: Optional[Mapping[str, Mapping[str, ArrayLike]]] = None,
                  edge_weight: ArrayLike = None, num_nodes: Optional[int] = None,
                  directed: bool = False, name: Optional[str] = None,
                  overwrite: bool = False) -> Dataset:
    """Writes a native dataset at ``path`` (as ``halo convert`` does: checked, staged, nothing
    left behind on error) and returns it opened.

    The graph is ``edge_index`` (2 x E ids, NumPy or torch, PyG's layout), ``csr`` (a SciPy
    sparse matrix, or an (offsets, indices) pair) or a SciPy matrix given as ``edge_index``.
    Unless ``directed``, it is symmetrised; duplicate edges merge (keeping the largest weight)
    and self-loops drop. ``x``: [nodes x F] features (float32 on disk, finite). ``y``: a class
    per node ([nodes] or [nodes x 1]; NaN or -1 = missing) or 0/1 rows ([nodes x T],
    multi-label). ``splits``: ``{"name": {"train": ids or mask, "valid": ..., "test": ...}}``.
    ``num_nodes`` defaults to the rows of x, y or the matrix, else the largest id + 1.
    """
    src = dst = weight = None
    graph = csr if csr is not None else edge_index
    if graph is None:
        raise _halo.ParamError("write_dataset: give edge_index= or csr=")
    if hasattr(graph, "tocoo"):  # SciPy sparse
        coo = graph.tocoo()
        if coo.shape[0] != coo.shape[1]:
            raise _halo.InputError("csr: expected a square adjacency, got shape %s" % (coo.shape,))
        src, dst = coo.row.astype(np.int64), coo.col.astype(np.int64)
        if edge_weight is None and not np.all(coo.data == 1):
            weight = coo.data
        num_nodes = coo.shape[0] if num_nodes is None else num_nodes
    elif csr is not None:
        offsets, indices = (_numpy(a, "csr") for a in csr)
        if offsets.ndim != 1 or indices.ndim != 1 or len(offsets) == 0 or \
                offsets[0] != 0 or offsets[-1] != len(indices) or np.any(np.diff(offsets) < 0):
            raise _halo.InputError("csr: expected offsets [n + 1] rising from 0 to len(indices)")
        src = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        dst = _ids(indices, "csr indices")
        num_nodes = len(offsets) - 1 if num_nodes is None else num_nodes
    else:
        ei = _numpy(edge_index, "edge_index")
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise _halo.InputError("edge_index: expected shape [2 x edges], got %s" % (ei.shape,))
        src, dst = _ids(ei[0], "edge_index[0]"), _ids(ei[1], "edge_index[1]")
    if edge_weight is not None:
        weight = _numpy(edge_weight, "edge_weight")
    features = _numpy(x, "x")
    labels, multilabel = _labels(y) if y is not None else (None, False)
    if num_nodes is None:
        for a in (features, labels):
            if a is not None:
                num_nodes = a.shape[0]
                break
        else:
            num_nodes = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    split_ids: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for split, parts in (splits or {}).items():
        missing = {"train", "valid", "test"} - set(parts)
        if missing:
            raise _halo.InputError("splits[%r]: missing %s" % (split, ", ".join(sorted(missing))))
        train, valid, test = (_ids(parts[p], "splits[%r][%r]" % (split, p))
                              for p in ("train", "valid", "test"))
        split_ids[split] = (train, valid, test)
    _halo.write_dataset(
        os.fspath(path), int(num_nodes), np.ascontiguousarray(src, dtype=np.int64),
        np.ascontiguousarray(dst, dtype=np.int64),
        None if weight is None else np.ascontiguousarray(weight, dtype=np.float32),
        None if features is None else np.ascontiguousarray(features, dtype=np.float32),
        labels, multilabel, split_ids, bool(directed),
        name if name is not None else os.path.basename(os.path.normpath(os.fspath(path))),
        bool(overwrite))
    return Dataset.open(path)


def from_pyg(data: "torch_geometric.data.Data", path: PathLike, *, split: str = "random",
             **kwargs: Any) -> Dataset:
    """Writes a PyG ``Data`` (edge_index, x, y, train/val/test masks as split ``split``)."""
    splits = None
    masks = [getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")]
    if all(m is not None for m in masks):
        splits = {split: dict(zip(("train", "valid", "test"), masks))}
    return write_dataset(path, edge_index=data.edge_index, x=getattr(data, "x", None),
                         y=getattr(data, "y", None), splits=splits,
                         num_nodes=data.num_nodes, **kwargs)


def from_dgl(graph: "dgl.DGLGraph", path: PathLike, *, split: str = "random",
             feat: str = "feat", label: str = "label", **kwargs: Any) -> Dataset:
    """Writes a DGL graph (edges, ndata[feat], ndata[label], train/val/test_mask)."""
    src, dst = graph.edges()
    nd = graph.ndata
    splits = None
    if all(k in nd for k in ("train_mask", "val_mask", "test_mask")):
        splits = {split: {"train": nd["train_mask"], "valid": nd["val_mask"],
                          "test": nd["test_mask"]}}
    return write_dataset(path, edge_index=np.stack([_numpy(src, "src"), _numpy(dst, "dst")]),
                         x=nd[feat] if feat in nd else None,
                         y=nd[label] if label in nd else None, splits=splits,
                         num_nodes=graph.num_nodes(), **kwargs)
