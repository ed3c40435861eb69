#!/usr/bin/env python3
"""Golden values for tests/gnn/layers/model_test.cc: 2-layer GATs computed independently with NumPy
(float64), written to gat_golden.json. The gradients are central differences of this forward
(step 1e-6, float64), so they do not rest on a derived backward.

For each layer with H heads of width F (edges u <- v of the symmetrised graph plus self-loops):
  z     = h W                                  [n x H*F]
  el[v] = <z[v, h], att_src[h]>,  er[u] = <z[u, h], att_dst[h]>
  alpha = softmax over u's edges of LeakyReLU_0.2(el[v] + er[u])
  o[u]  = sum_v alpha z[v]                     per head; + h W_res (in != H*F) or + h (residual)
  hidden layer: ELU(o + bias), heads concatenated;  last layer: mean over heads of o, + bias
  loss  = mean over labelled train rows of -log softmax(logits)[y]

Run: python3 tests/data/golden/make_gat_golden.py
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261203)


def forward(p, X, nbrs, layers, residual):
    h = X
    for l, (heads, width, last) in enumerate(layers):
        pre = "layer%d." % l
        z = h @ p[pre + "weight"]
        n = z.shape[0]
        zh = z.reshape(n, heads, width)
        el = (zh * p[pre + "att_src"][None]).sum(2)
        er = (zh * p[pre + "att_dst"][None]).sum(2)
        o = np.zeros((n, heads, width))
        for u in range(n):
            s = el[nbrs[u]] + er[u][None]  # [deg x H]
            s = np.where(s > 0, s, 0.2 * s)
            a = np.exp(s - s.max(0, keepdims=True))
            a /= a.sum(0, keepdims=True)
            o[u] = (a[:, :, None] * zh[nbrs[u]]).sum(0)
        o = o.reshape(n, heads * width)
        if residual:
            o = o + (h @ p[pre + "res_weight"] if pre + "res_weight" in p else h)
        if last:
            return o.reshape(n, heads, width).mean(1) + p[pre + "bias"]
        o = o + p[pre + "bias"]
        h = np.where(o > 0, o, np.expm1(o))


def loss_of(Z, y, train):
    rows = [r for r in train if y[r] >= 0]
    S = Z - Z.max(1, keepdims=True)
    S = S - np.log(np.exp(S).sum(1, keepdims=True))
    return -np.mean([S[r, y[r]] for r in rows])


def case(name, n, edges, fin, heads, hidden, out_heads, classes, residual, train):
    nbrs = [sorted({u} | {b for a, b in edges if a == u} | {a for a, b in edges if b == u})
            for u in range(n)]
    layers = [(heads, hidden, False), (out_heads, classes, True)]
    p = {}
    width_in = fin
    for l, (h, w, last) in enumerate(layers):
        pre = "layer%d." % l
        p[pre + "weight"] = rng.normal(size=(width_in, h * w)) * 0.5
        p[pre + "att_src"] = rng.normal(size=(h, w)) * 0.5
        p[pre + "att_dst"] = rng.normal(size=(h, w)) * 0.5
        if residual and width_in != h * w:
            p[pre + "res_weight"] = rng.normal(size=(width_in, h * w)) * 0.5
        p[pre + "bias"] = rng.normal(size=w if last else h * w) * 0.1
        width_in = h * w
    X = rng.normal(size=(n, fin))
    y = rng.integers(0, classes, size=n)
    y[n - 1] = -1  # one unlabelled node: masked out of the loss even if listed
    Z = forward(p, X, nbrs, layers, residual)
    loss = loss_of(Z, y, train)
    grads = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            keep = v[i]
            v[i] = keep + 1e-6
            up = loss_of(forward(p, X, nbrs, layers, residual), y, train)
            v[i] = keep - 1e-6
            down = loss_of(forward(p, X, nbrs, layers, residual), y, train)
            v[i] = keep
            g[i] = (up - down) / 2e-6
        grads[k] = g.tolist()
    return dict(name=name, n=n, edges=edges, fin=fin, heads=heads, hidden=hidden,
                out_heads=out_heads, classes=classes, residual=residual, train=train,
                X=X.tolist(), labels=y.tolist(), params={k: v.tolist() for k, v in p.items()},
                logits=Z.tolist(), loss=float(loss), grads=grads)


#   0 - 1 - 2 - 3      4 - 5 (6 unlabelled, attached to 5)
edges = [[0, 1], [1, 2], [2, 3], [0, 2], [4, 5], [5, 6]]
cases = [
    # hidden heads concatenated, output heads averaged, no residual
    case("averaged heads", 7, edges, 5, 2, 3, 2, 3, False, [0, 1, 3, 4, 6]),
    # residual: projected in layer 0 (4 != 2 x 3), identity in layer 1 (6 = 2 x 3)
    case("residual", 7, edges, 4, 2, 3, 2, 3, True, [0, 2, 3, 5, 6]),
    # one output head, as the GAT paper's Cora model
    case("one output head", 7, edges, 3, 3, 2, 1, 4, False, [1, 2, 4, 5]),
]
with open(os.path.join(HERE, "gat_golden.json"), "w") as fh:
    json.dump(cases, fh, indent=1)
