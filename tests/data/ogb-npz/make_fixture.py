#!/usr/bin/env python3
"""Regenerates tests/data/ogb-npz: a 5-node dataset in OGB's binary layout (the layout of
ogbn-papers100M), written by NumPy as OGB writes it (np.savez_compressed):

  raw/data.npz        edge_index int64 [2, 3], node_feat float32 [5, 2],
                      num_nodes_list int64 [1], num_edges_list int64 [1]
  raw/node-label.npz  node_label float64 [5, 1] with NaN for unlabelled node 2
  split/time/{train,valid,test}.csv.gz

Graph: 0-1-2-3 and isolated 4; the test (tests/graph/ogb_test.cc) checks these values.
"""
import gzip
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(HERE, "raw"), exist_ok=True)
os.makedirs(os.path.join(HERE, "split", "time"), exist_ok=True)
np.savez_compressed(
    os.path.join(HERE, "raw", "data.npz"),
    edge_index=np.array([[0, 1, 2], [1, 2, 3]], dtype=np.int64),
    node_feat=(np.arange(10, dtype=np.float32).reshape(5, 2) + 0.5),
    num_nodes_list=np.array([5], dtype=np.int64),
    num_edges_list=np.array([3], dtype=np.int64),
)
np.savez_compressed(
    os.path.join(HERE, "raw", "node-label.npz"),
    node_label=np.array([[0], [1], [np.nan], [2], [1]], dtype=np.float64),
)
for name, ids in (("train", [0, 1]), ("valid", [2]), ("test", [3, 4])):
    with gzip.open(os.path.join(HERE, "split", "time", name + ".csv.gz"), "wt") as f:
        f.write("".join(f"{i}\n" for i in ids))
