"""Reads arrays of a halo native dataset (docs/FORMATS.md) with NumPy, for the peer scripts.

    import native
    meta = native.read_meta(DATASET)
    offsets = native.load_array(DATASET, meta, "offsets")

Every check failure raises DatasetError naming the file and what was expected.
"""

import json
import os

import numpy as np

HEADER_BYTES = 64
DTYPES = {1: np.int8, 2: np.int32, 3: np.int64, 4: np.float32, 5: np.float64}
DTYPE_NAMES = {"int8": 1, "int32": 2, "int64": 3, "float32": 4, "float64": 5}


class DatasetError(Exception):
    """A dataset file that is missing, malformed or disagrees with meta.json."""


def read_meta(ds):
    """The dataset's meta.json as a dict."""
    try:
        with open(os.path.join(ds, "meta.json")) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise DatasetError(f"{ds}: cannot read meta.json: {e}") from e


def load_array(ds, meta, name):
    """Reads NAME.bin: checks the 64-byte header against meta.json, returns the payload (one copy)."""
    info = meta["arrays"].get(name)
    if info is None:
        raise DatasetError(f"{ds}: meta.json has no array '{name}'")
    path = os.path.join(ds, info["file"])
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if len(head) != HEADER_BYTES or head[:8] != b"HALOARR1":
        raise DatasetError(f"{path}: not a halo array file")
    version = int.from_bytes(head[8:12], "little")
    dtype = int.from_bytes(head[12:16], "little")
    rows = int.from_bytes(head[16:24], "little")
    cols = int.from_bytes(head[24:32], "little")
    payload = int.from_bytes(head[40:48], "little")
    if version != 1 or dtype not in DTYPES:
        raise DatasetError(f"{path}: unsupported version {version} / dtype {dtype}")
    if DTYPE_NAMES.get(info["dtype"]) != dtype or [rows, cols] != list(info["shape"]):
        raise DatasetError(f"{path}: header disagrees with meta.json")
    np_dtype = DTYPES[dtype]
    if payload != rows * cols * np.dtype(np_dtype).itemsize:
        raise DatasetError(f"{path}: payload size {payload} != rows x cols x itemsize")
    if os.path.getsize(path) != HEADER_BYTES + payload:
        raise DatasetError(f"{path}: truncated: expected {HEADER_BYTES + payload} bytes, "
                           f"found {os.path.getsize(path)}")
    a = np.fromfile(path, dtype=np_dtype, count=rows * cols, offset=HEADER_BYTES)
    return a.reshape(rows, cols) if cols > 1 else a
