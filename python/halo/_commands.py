"""halo's commands in this process: keyword arguments become the CLI's flags."""
from __future__ import annotations

import json
import os
import tempfile
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from . import _halo

if TYPE_CHECKING:
    from ._dataset import Dataset

PathLike = Union[str, "os.PathLike[str]"]


def _flags(flags: Dict[str, Any]) -> List[str]:
    """``hidden=64, norm_features=True, quiet=False`` -> ``["--hidden", "64", "--norm-features"]``."""
    out: List[str] = []
    for key, value in flags.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def run(*args: Union[PathLike, int, float]) -> int:
    """Runs ``halo ARGS...`` in this process and returns its exit status (0); errors raise
    :class:`halo.Error` with the line the CLI prints. Output goes to this process's stdout."""
    return _run(args, True)


def _run(args: Sequence[Union[PathLike, int, float]], echo: bool) -> int:
    """run's body; without echo, the command's report (stdout, the footer on stderr) is dropped."""
    argv: List[str] = []
    for a in args:
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            a = str(a)  # run("train", d, "--epochs", 5)
        if not isinstance(a, (str, bytes, os.PathLike)):
            raise _halo.ParamError("argument %r: expected a str, os.PathLike or number" % (a,))
        argv.append(os.fsdecode(os.fspath(a)))
        if "\0" in argv[-1]:  # a C string would end there: the command would get another one
            raise _halo.ParamError("argument %r: contains a NUL character" % argv[-1])
    return _halo.run(argv, echo)


def convert(input: PathLike, out: PathLike, **flags: Any) -> Union["Dataset", str]:
    """``halo convert INPUT -o OUT [flags]``; returns the written :class:`halo.Dataset`, or for
    an event file (a temporal dataset, for :func:`halo.tgn.train`) its path."""
    from ._dataset import Dataset
    run("convert", input, "-o", out, *_flags(flags))
    with open(os.path.join(out, "meta.json")) as f:
        kind = json.load(f).get("kind", "graph")
    return Dataset.open(out) if kind == "graph" else os.fspath(out)


def generate(out: PathLike, **flags: Any) -> Union["Dataset", None]:
    """``halo generate -o OUT [flags]`` (nodes=, avg_degree=, features=, classes=, ...)."""
    from ._dataset import Dataset
    run("generate", "-o", out, *_flags(flags))
    return Dataset.open(out) if flags.get("format", "native") == "native" else None


def partition(dataset: PathLike, k: int, out: PathLike, **flags: Any) -> Dict[str, Any]:
    """``halo partition DATASET -k K -o OUT [flags]``; returns the quality report (the parts'
    meta.json: cut, communication volume, balance, options, seconds) as a dict."""
    run("partition", dataset, "-k", str(k), "-o", out, *_flags(flags))
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    meta.pop("arrays", None)
    return meta


def _summary(log: PathLike) -> Dict[str, Any]:
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return next(r for r in reversed(records) if r.get("type") == "summary")


def train(dataset: PathLike, *, predictions: bool = False, verbose: bool = False,
          **flags: Any) -> Union[Dict[str, Any], Tuple[Dict[str, Any], np.ndarray]]:
    """``halo train DATASET|PARTS [flags]`` on one process; returns the log's summary record
    (the dict ``--log`` ends with) and, with ``predictions=True``, also the best model's
    predictions in input order (``--predictions-out``) as a NumPy array. Prints nothing unless
    ``verbose=True`` (then the CLI's lines: one per epoch, the summary, the time and memory on
    stderr); warnings still show."""
    with tempfile.TemporaryDirectory(prefix="halo-train-") as tmp:
        log = flags.pop("log", None) or os.path.join(tmp, "log.jsonl")
        extra = ["--log", log]
        if predictions:
            extra += ["--predictions-out", os.path.join(tmp, "pred.npy")]
        _run(["train", dataset, *extra, *_flags(flags)], verbose)
        summary = _summary(log)
        if not predictions:
            return summary
        return summary, np.load(os.path.join(tmp, "pred.npy"))


def predict(dataset: PathLike, checkpoint: PathLike, *, embeddings: bool = False,
            **flags: Any) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """``halo predict DATASET|PARTS --checkpoint DIR [flags]`` on one process; returns the
    predictions (input order) and, with ``embeddings=True``, also layer ``layer=``'s output
    (default: the last hidden layer) as float32 ``[nodes x width]``."""
    with tempfile.TemporaryDirectory(prefix="halo-predict-") as tmp:
        extra = ["--checkpoint", checkpoint, "-o", os.path.join(tmp, "pred.npy")]
        if embeddings:
            extra += ["--embeddings-out", os.path.join(tmp, "emb.npy")]
        run("predict", dataset, *extra, *_flags(flags))
        pred = np.load(os.path.join(tmp, "pred.npy"))
        if not embeddings:
            return pred
        return pred, np.load(os.path.join(tmp, "emb.npy"))


def _tgn_train(dataset: PathLike, *, verbose: bool = False, **flags: Any) -> Dict[str, Any]:
    """``halo tgn train DATASET [flags]``; returns the log's summary record. Prints nothing
    unless ``verbose=True``, as :func:`train`."""
    with tempfile.TemporaryDirectory(prefix="halo-tgn-") as tmp:
        log = flags.pop("log", None) or os.path.join(tmp, "log.jsonl")
        _run(["tgn", "train", dataset, "--log", log, *_flags(flags)], verbose)
        return _summary(log)


tgn = SimpleNamespace(train=_tgn_train)
