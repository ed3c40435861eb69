#!/usr/bin/python3
"""Golden values for tests/gnn/temporal/temporal_layers_test.cc, computed with PyTorch in float64:
torch.nn.GRUCell forward and backward (loss = sum(h' * G)), and TGN's time encoding
cos(w * dt + b) with its gradients. Weights are stored in halo's layout: W = weight_ih^T
(in x 3H), U = weight_hh^T (H x 3H), gate order r, z, n as PyTorch.
Run: /usr/bin/python3 tests/data/golden/make_tgn_golden.py
"""
import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261130)
B, I, H = 5, 7, 4

cell = torch.nn.GRUCell(I, H).double()
with torch.no_grad():
    for p in cell.parameters():
        p.copy_(torch.from_numpy(rng.normal(size=tuple(p.shape)) * 0.5))
x = torch.tensor(rng.normal(size=(B, I)), requires_grad=True)
h = torch.tensor(rng.normal(size=(B, H)), requires_grad=True)
G = torch.tensor(rng.normal(size=(B, H)))
out = cell(x, h)
(out * G).sum().backward()

D = 6
dt = torch.tensor(rng.uniform(0, 1e4, size=8))
# Parameters are float32 in halo: round them first (with dt up to 1e4, float32 rounding of w alone
# moves the cosine's argument by ~1e-3).
w = torch.tensor((10.0 ** (-9.0 * np.arange(D) / (D - 1)) * rng.uniform(0.5, 1.5, size=D)).astype(np.float32)
                 .astype(np.float64), requires_grad=True)
b = torch.tensor(rng.normal(size=D).astype(np.float32).astype(np.float64), requires_grad=True)
phi = torch.cos(dt[:, None] * w[None, :] + b[None, :])
Gt = torch.tensor(rng.normal(size=(8, D)))
(phi * Gt).sum().backward()

# Temporal attention as TGN builds it: nn.MultiheadAttention(dq, 2 heads, kdim = vdim = dk),
# key_padding_mask for empty slots, then MergeLayer fc2(relu(fc1([attn ‖ h]))).
Bq, K, dh, dq, dk, dout = 3, 4, 3, 6, 5, 4
mha = torch.nn.MultiheadAttention(dq, 2, kdim=dk, vdim=dk, batch_first=True).double()
fc1 = torch.nn.Linear(dq + dh, dout).double()
fc2 = torch.nn.Linear(dout, dout).double()
with torch.no_grad():
    for mod in (mha, fc1, fc2):
        for p in mod.parameters():
            p.copy_(torch.from_numpy(rng.normal(size=tuple(p.shape)) * 0.5))
aq = torch.tensor(rng.normal(size=(Bq, 1, dq)), requires_grad=True)
akv = torch.tensor(rng.normal(size=(Bq, K, dk)), requires_grad=True)
ah = torch.tensor(rng.normal(size=(Bq, dh)), requires_grad=True)
valid = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 1, 0, 1]], dtype=np.uint8)
att, _ = mha(aq, akv, akv, key_padding_mask=torch.from_numpy(valid == 0))
az = fc2(torch.relu(fc1(torch.cat([att[:, 0, :], ah], dim=1))))
aG = torch.tensor(rng.normal(size=(Bq, dout)))
(az * aG).sum().backward()
ib = mha.in_proj_bias

t = lambda a: a.detach().numpy().tolist()
json.dump({
    "gru": {"x": t(x), "h": t(h), "G": t(G), "W": t(cell.weight_ih.T), "U": t(cell.weight_hh.T),
            "bw": t(cell.bias_ih), "bu": t(cell.bias_hh), "out": t(out), "dx": t(x.grad), "dh": t(h.grad),
            "dW": t(cell.weight_ih.grad.T), "dU": t(cell.weight_hh.grad.T), "dbw": t(cell.bias_ih.grad),
            "dbu": t(cell.bias_hh.grad)},
    "attention": {"q": t(aq[:, 0, :]), "kv": t(akv.reshape(Bq * K, dk)), "h": t(ah), "valid": valid.reshape(-1).tolist(),
                  "k": K, "G": t(aG), "z": t(az),
                  "wq": t(mha.q_proj_weight.T), "wk": t(mha.k_proj_weight.T), "wv": t(mha.v_proj_weight.T),
                  "bq": t(ib[:dq]), "bk": t(ib[dq:2 * dq]), "bv": t(ib[2 * dq:]),
                  "wo": t(mha.out_proj.weight.T), "bo": t(mha.out_proj.bias),
                  "w1": t(fc1.weight.T), "b1": t(fc1.bias), "w2": t(fc2.weight.T), "b2": t(fc2.bias),
                  "dq": t(aq.grad[:, 0, :]), "dkv": t(akv.grad.reshape(Bq * K, dk)), "dh": t(ah.grad),
                  "dwq": t(mha.q_proj_weight.grad.T), "dwo": t(mha.out_proj.weight.grad.T),
                  "dw1": t(fc1.weight.grad.T)},
    "time": {"dt": t(dt), "w": t(w), "b": t(b), "G": t(Gt), "out": t(phi), "dw": t(w.grad), "db": t(b.grad)},
}, open(os.path.join(HERE, "tgn_golden.json"), "w"))
