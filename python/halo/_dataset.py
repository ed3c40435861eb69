"""Native datasets from and to NumPy, SciPy, PyTorch, PyG and DGL."""
from __future__ import annotations

import json
import operator
import os
import warnings
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from . import _halo

if TYPE_CHECKING:  # only for the annotations: none of these is imported at run time
    import dgl
    import scipy.sparse
    import torch_geometric.data

PathLike = Union[str, "os.PathLike[str]"]
ArrayLike = Any  # a NumPy array, a torch tensor or a (nested) list of numbers
# {name: {"train": ids or mask, "valid": ..., "test": ...}}, or one split flat: {"train": ...}
Splits = Union[Mapping[str, Mapping[str, ArrayLike]], Mapping[str, ArrayLike]]


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
        return cls(path, _halo.open_dataset(_path(path), bool(validate)))

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
        """split's node sets as masks (none where the dataset has no split and none is named)."""
        if split is not None and split not in self.splits:
            raise _halo.ParamError("%s: no split named %r (it has %s)" % (
                self.path, split, ", ".join(self.splits) or "none"))
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
        masks = self._masks(split or next(iter(self.splits), None))  # a wrong name: no import
        import torch
        from torch_geometric.data import Data
        data = Data(edge_index=torch.from_numpy(self.edge_index()), num_nodes=self.num_nodes)
        if self.features is not None:
            data.x = torch.from_numpy(np.array(self.features))
        y = self._y()
        if y is not None:
            data.y = torch.from_numpy(y)
        for part, m in masks.items():
            setattr(data, {"valid": "val"}.get(part, part) + "_mask", torch.from_numpy(m))
        return data

    def to_dgl(self, split: Optional[str] = None) -> "dgl.DGLGraph":
        """A ``dgl.DGLGraph`` with ndata feat, label and train/val/test_mask of ``split``."""
        masks = self._masks(split or next(iter(self.splits), None))
        import dgl
        import torch
        ei = self.edge_index()
        g = dgl.graph((torch.from_numpy(ei[0]), torch.from_numpy(ei[1])),
                      num_nodes=self.num_nodes)
        if self.features is not None:
            g.ndata["feat"] = torch.from_numpy(np.array(self.features))
        y = self._y()
        if y is not None:
            g.ndata["label"] = torch.from_numpy(y)
        for part, m in masks.items():
            g.ndata[{"valid": "val"}.get(part, part) + "_mask"] = torch.from_numpy(m)
        return g

    def __repr__(self) -> str:
        return "halo.Dataset(%r: %d nodes, %d stored edges, %s features, %s)" % (
            self.path, self.num_nodes, self.num_edges,
            self.features.shape[1] if self.features is not None else 0, self.label_kind)


_MAX_NODES = 2**31 - 1  # NodeId is int32


def _path(path: PathLike) -> str:
    """path as a string; ParamError for one with a NUL (C++ would cut it there: another path)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise _halo.ParamError("path: expected a str or os.PathLike, got %s" % type(path).__name__)
    p = os.fsdecode(os.fspath(path))
    if "\0" in p:
        raise _halo.ParamError("path %r: contains a NUL character" % p)
    return p
_PARTS = ("train", "valid", "test")


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _numpy(value: ArrayLike, what: str) -> Any:
    """value (NumPy, a torch tensor, a list) as a NumPy array of numbers; InputError otherwise."""
    if value is None:
        return None
    try:
        if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
            value = value.detach().cpu().numpy()
        a = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as e:  # ragged lists, odd objects
        raise _halo.InputError("%s: not an array of numbers (%s)" % (what, _one_line(e))) from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise _halo.InputError("%s: expected numbers, got an array of %s" % (what, a.dtype))
    return a


def _count(value: Any, what: str) -> int:
    """value as a node count: an integer (or a float without a fraction) in [0, 2^31 - 1]."""
    n: Any = None
    if not isinstance(value, (bool, np.bool_)):
        try:
            n = operator.index(value)
        except TypeError:
            if isinstance(value, (float, np.floating)) and float(value).is_integer():
                n = int(value)
    if n is None:
        raise _halo.ParamError("%s: expected a whole number of nodes, got %s" % (what, value))
    if not 0 <= n <= _MAX_NODES:
        raise _halo.ParamError("%s: %d outside [0, 2^31 - 1]" % (what, n))
    return n


def _ids(value: ArrayLike, what: str, n: int, mask: bool = False) -> np.ndarray:
    """value as int64 node ids, each in [0, n) (the message names the first that is not, with
    its value as given); with mask, a boolean array of one entry per node is its true positions."""
    a = _numpy(value, what)
    if a.dtype.kind == "b":
        if not mask:
            raise _halo.InputError("%s: expected node ids, got booleans" % what)
        if a.shape != (n,):
            raise _halo.InputError("%s: a mask of shape %s, expected one entry per node (%d)" %
                                   (what, list(a.shape), n))
        return np.flatnonzero(a).astype(np.int64)
    if a.ndim != 1:
        raise _halo.InputError("%s: expected a 1-D array of node ids, got %d dimensions" %
                               (what, a.ndim))
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            raise _halo.InputError("%s: expected integer node ids, got %s values" % (what, a.dtype))
    outside = (a < 0) | (a >= n)  # before any cast: a uint64 above 2^63 stays itself
    if np.any(outside):
        i = int(np.argmax(outside))
        v = a[i].item()
        raise _halo.InputError("%s[%d]: node id %d outside [0, %d)" % (what, i, int(v), n))
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


def _graph(edge_index: Any, csr: Any) -> Tuple[Any, Any, Any, Optional[int]]:
    """The edges given (sources, destinations, weights or None, as given: checked later) and
    the node count the graph itself states (a matrix's, CSR offsets'), or None."""
    if edge_index is not None and csr is not None:
        raise _halo.ParamError("write_dataset: give edge_index= or csr=, not both")
    graph = csr if csr is not None else edge_index
    if graph is None:
        raise _halo.ParamError("write_dataset: give edge_index= or csr=")
    if hasattr(graph, "tocoo"):  # SciPy sparse
        coo = graph.tocoo()
        if len(coo.shape) != 2 or coo.shape[0] != coo.shape[1]:
            raise _halo.InputError("csr: expected a square adjacency, got shape %s" % (coo.shape,))
        weight = None if np.all(coo.data == 1) else _numpy(coo.data, "csr values")
        return coo.row, coo.col, weight, int(coo.shape[0])
    if csr is not None:
        if isinstance(csr, (str, bytes)) or not hasattr(csr, "__len__") or len(csr) != 2:
            raise _halo.ParamError("csr: expected a SciPy sparse matrix or an (offsets, indices) "
                                   "pair, got %s" % type(csr).__name__ +
                                   (" of %d" % len(csr) if hasattr(csr, "__len__") else ""))
        offsets, indices = (_numpy(a, "csr") for a in csr)
        if offsets.ndim != 1 or indices.ndim != 1 or offsets.dtype.kind not in "iu" or \
                len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(indices) or \
                np.any(offsets[1:] < offsets[:-1]):
            raise _halo.InputError("csr: expected integer offsets [n + 1] rising from 0 to "
                                   "len(indices)")
        n = _count(len(offsets) - 1, "csr: offsets [n + 1] with n")
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets).astype(np.int64))
        return src, indices, None, n
    ei = _numpy(edge_index, "edge_index")
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise _halo.InputError("edge_index: expected shape [2 x edges], got %s" % (ei.shape,))
    return ei[0], ei[1], None, None


_ONE_SPLIT = "random"  # the name of a split given flat, as from_pyg and from_dgl name theirs


def _split_ids(splits: Any, n: int) -> Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """splits as name -> (train, valid, test) int64 ids; names checked first (ParamError), as
    the extension checks them: a split's name is part of its files' names. One split given
    flat ({"train": ids, "valid": ..., "test": ...}) is split "random"."""
    if splits is None:
        return {}
    if not isinstance(splits, Mapping):
        raise _halo.ParamError("splits: expected {name: {'train': ..., 'valid': ..., "
                               "'test': ...}}, got %s" % type(splits).__name__)
    # Flat: only part names as keys and an array (not a mapping) under one of them. A split
    # named "train" holds a mapping, so the two shapes cannot be confused.
    if splits and all(k in _PARTS for k in splits) and \
            not all(isinstance(v, Mapping) for v in splits.values()):
        missing = [p for p in _PARTS if p not in splits]
        if missing:
            raise _halo.InputError(
                "splits: missing %s (one split is {'train': ..., 'valid': ..., 'test': ...}, "
                "several are {name: {'train': ..., 'valid': ..., 'test': ...}})" %
                ", ".join(missing))
        train, valid, test = (_ids(splits[p], "splits[%r]" % p, n, mask=True) for p in _PARTS)
        return {_ONE_SPLIT: (train, valid, test)}
    for split in splits:
        if not isinstance(split, str):
            raise _halo.ParamError("splits: a split name is a string, got %r" % (split,))
        try:
            split.encode("utf-8")
        except UnicodeError:
            raise _halo.ParamError("splits: the split name %r is not UTF-8" % split) from None
        _halo.check_split_name(split)
    out: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for split, parts in splits.items():
        if not isinstance(parts, Mapping):
            raise _halo.InputError("splits[%r]: expected {'train': ..., 'valid': ..., "
                                   "'test': ...}, got %s" % (split, type(parts).__name__))
        unknown = [k for k in parts if k not in _PARTS]
        if unknown:
            raise _halo.InputError("splits[%r]: unknown key %r (expected train, valid, test)" %
                                   (split, unknown[0]))
        missing = [p for p in _PARTS if p not in parts]
        if missing:
            raise _halo.InputError("splits[%r]: missing %s" % (split, ", ".join(missing)))
        train, valid, test = (_ids(parts[p], "splits[%r][%r]" % (split, p), n, mask=True)
                              for p in _PARTS)
        out[split] = (train, valid, test)
    return out


def write_dataset(path: PathLike, *, edge_index: Any = None, csr: Any = None,
                  x: ArrayLike = None, y: ArrayLike = None,
                  splits: Optional[Splits] = None,
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
    multi-label). ``splits``: ``{"name": {"train": ids or mask, "valid": ..., "test": ...}}``
    (a mask has one entry per node; a name is 1 to 239 bytes, no '/', control characters, '.'
    or '..'), or one split given flat, ``{"train": ..., "valid": ..., "test": ...}``, which is
    named "random" (as :func:`from_pyg` names its masks' split). ``num_nodes`` defaults to the
    rows of the matrix, x or y, else the largest id + 1. Bad arguments raise
    :class:`halo.ParamError`, bad arrays :class:`halo.InputError`.
    """
    path = _path(path)
    src, dst, weight, n = _graph(edge_index, csr)
    if name is not None and not isinstance(name, str):
        raise _halo.ParamError("name: expected a string, got %s" % type(name).__name__)
    if edge_weight is not None:
        weight = _numpy(edge_weight, "edge_weight")
    features = _numpy(x, "x")
    labels, multilabel = _labels(y) if y is not None else (None, False)
    if num_nodes is not None:
        n = _count(num_nodes, "num_nodes")
    elif n is None:
        for a in (features, labels):
            if a is not None and a.ndim > 0:
                n = _count(a.shape[0], "num_nodes (the rows of x or y)")
                break
        else:  # the largest id + 1: ids checked against the largest count first
            n = max((int(_ids(e, w, _MAX_NODES).max(initial=-1)) + 1
                     for e, w in ((src, "edge_index[0]"), (dst, "edge_index[1]"))))
    what = ("csr indices", "csr indices") if csr is not None else ("edge_index[0]", "edge_index[1]")
    src, dst = _ids(src, what[0], n), _ids(dst, what[1], n)
    split_ids = _split_ids(splits, n)
    _halo.write_dataset(
        path, n, src, dst,
        None if weight is None else np.ascontiguousarray(weight, dtype=np.float32),
        None if features is None else np.ascontiguousarray(features, dtype=np.float32),
        labels, multilabel, split_ids, bool(directed),
        name if name is not None else os.path.basename(os.path.normpath(path)),
        bool(overwrite))
    return Dataset.open(path)


def _mask_split(masks: Mapping[str, Any], split: str, source: str) -> Optional[Dict[str, Any]]:
    """{split: {train, valid, test}} from the three masks (PyG's or DGL's names as keys); None
    when there are none, and a warning naming the missing ones when some are missing: a split
    needs all three, and halo train needs a split."""
    given = [k for k, m in masks.items() if m is not None]
    if len(given) == len(masks):
        return {split: dict(zip(_PARTS, masks.values()))}
    if given:
        warnings.warn("%s: %s without %s: no split written (halo train needs train, valid and "
                      "test node sets); give one with splits={%r: {'train': ..., 'valid': ..., "
                      "'test': ...}}" % (source, ", ".join(given),
                                         ", ".join(k for k in masks if k not in given), split),
                      stacklevel=3)
    return None


def from_pyg(data: "torch_geometric.data.Data", path: PathLike, *, split: str = "random",
             splits: Optional[Splits] = None,
             **kwargs: Any) -> Dataset:
    """Writes a PyG ``Data`` (edge_index, x, y, and its train/val/test masks as split ``split``,
    or ``splits`` as :func:`write_dataset` takes them). Some of the masks without the others
    (KarateClub has only train_mask) make no split, with a warning."""
    if splits is None:
        splits = _mask_split({k: getattr(data, k, None)
                              for k in ("train_mask", "val_mask", "test_mask")}, split, "from_pyg")
    return write_dataset(path, edge_index=data.edge_index, x=getattr(data, "x", None),
                         y=getattr(data, "y", None), splits=splits,
                         num_nodes=data.num_nodes, **kwargs)


def from_dgl(graph: "dgl.DGLGraph", path: PathLike, *, split: str = "random",
             feat: str = "feat", label: str = "label",
             splits: Optional[Splits] = None,
             **kwargs: Any) -> Dataset:
    """Writes a DGL graph (edges, ndata[feat], ndata[label], train/val/test_mask as split
    ``split``, or ``splits``); some of the masks without the others make no split, with a
    warning."""
    src, dst = graph.edges()
    nd = graph.ndata
    if splits is None:
        splits = _mask_split({k: nd[k] if k in nd else None
                              for k in ("train_mask", "val_mask", "test_mask")}, split, "from_dgl")
    return write_dataset(path, edge_index=np.stack([_numpy(src, "src"), _numpy(dst, "dst")]),
                         x=nd[feat] if feat in nd else None,
                         y=nd[label] if label in nd else None, splits=splits,
                         num_nodes=graph.num_nodes(), **kwargs)
