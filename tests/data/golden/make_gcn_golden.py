#!/usr/bin/env python3
"""Golden values for tests/gnn/layers/model_test.cc: a 2-layer GCN computed independently with NumPy
(float64), forward and backward, written to gcn_golden.json.

  A_hat = D^-1/2 (A + I) D^-1/2          (A symmetrised, degrees with the self-loop)
  H     = relu(A_hat X W1 + b1)
  Z     = A_hat H W2 + b2
  loss  = mean over train rows of -log softmax(Z)[y]

Two shapes cover both layer orders in halo (transform first when the layer narrows).
Run: python3 tests/data/golden/make_gcn_golden.py
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261130)


def case(name, n, edges, fin, hidden, fout, train):
    A = np.zeros((n, n))
    for u, v in edges:
        A[u, v] = A[v, u] = 1
    Ah = A + np.eye(n)
    d = Ah.sum(1)
    Ah = Ah / np.sqrt(np.outer(d, d))
    X = rng.normal(size=(n, fin))
    W1 = rng.normal(size=(fin, hidden)) * 0.5
    b1 = rng.normal(size=hidden) * 0.1
    W2 = rng.normal(size=(hidden, fout)) * 0.5
    b2 = rng.normal(size=fout) * 0.1
    y = rng.integers(0, fout, size=n)
    y[n - 1] = -1  # one unlabelled node: masked out of the loss even if listed
    P = Ah @ X @ W1 + b1
    H = np.maximum(P, 0)
    Z = Ah @ H @ W2 + b2
    rows = [r for r in train if y[r] >= 0]
    S = np.exp(Z - Z.max(1, keepdims=True))
    S /= S.sum(1, keepdims=True)
    loss = -np.mean([np.log(S[r, y[r]]) for r in rows])
    dZ = np.zeros_like(Z)
    for r in rows:
        dZ[r] = S[r]
        dZ[r, y[r]] -= 1
    dZ /= len(rows)
    dW2 = (Ah @ H).T @ dZ
    db2 = dZ.sum(0)
    dH = Ah.T @ dZ @ W2.T
    dP = dH * (P > 0)
    dW1 = (Ah @ X).T @ dP
    db1 = dP.sum(0)
    f = lambda a: np.asarray(a).tolist()
    return dict(name=name, n=n, edges=edges, fin=fin, hidden=hidden, fout=fout, train=train,
                X=f(X), W1=f(W1), b1=f(b1), W2=f(W2), b2=f(b2), labels=f(y),
                logits=f(Z), loss=float(loss), dW1=f(dW1), db1=f(db1), dW2=f(dW2), db2=f(db2))


#   0 - 1 - 2 - 3      4 - 5 (6 unlabelled, attached to 5)
edges = [[0, 1], [1, 2], [2, 3], [0, 2], [4, 5], [5, 6]]
cases = [case("narrowing", 7, edges, 5, 4, 3, [0, 1, 3, 4, 6]),
         case("widening", 7, edges, 3, 6, 4, [0, 2, 3, 5, 6])]
with open(os.path.join(HERE, "gcn_golden.json"), "w") as fh:
    json.dump(cases, fh, indent=1)
