"""halo for Python: full-graph GNN training on partitioned graphs.

The package is a thin layer over halo's C++ libraries (the extension ``halo._halo``): datasets
open as zero-copy NumPy views of their mapped files, graphs from NumPy, SciPy, PyTorch, PyG and
DGL are written with the checks of ``halo convert``, and every command (convert, partition,
train, predict, tgn train) runs in this process through the command line's own code, so flags,
defaults and error messages are the CLI's. Errors raise :class:`InputError` (bad data),
:class:`ParamError` (bad parameter) or :class:`SystemError` (the machine), all :class:`Error`,
carrying the one line the CLI prints.

Multi-rank training stays ``mpirun -np K halo train PARTS``: see python/README.md for a driver.
"""
from ._halo import Error, InputError, ParamError, SystemError, __version__
from ._dataset import Dataset, write_dataset, from_pyg, from_dgl
from ._commands import run, convert, generate, partition, train, predict, tgn

__all__ = [
    "Error", "InputError", "ParamError", "SystemError", "__version__",
    "Dataset", "write_dataset", "from_pyg", "from_dgl",
    "run", "convert", "generate", "partition", "train", "predict", "tgn",
]
