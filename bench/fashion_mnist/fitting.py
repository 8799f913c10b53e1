"""The one training loop of the Fashion-MNIST networks (the benchmark's five and the shipped example):
AdamW with a one-cycle schedule, seeded shuffles, batch 128, on the CPU."""

from __future__ import annotations

import fmnist
import numpy as np
import torch
from torch import nn

BATCH = 128


def fit(net: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, lr: float, label: str = "") -> nn.Module:
    """Train `net` on (x, y) for `epochs`; prints the mean loss of each epoch, prefixed by `label`."""
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    steps = epochs * ((len(x) + BATCH - 1) // BATCH)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    gen = torch.Generator().manual_seed(fmnist.SEED)
    net.train()
    for epoch in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        total = 0.0
        for start in range(0, len(x), BATCH):
            idx = perm[start : start + BATCH]
            loss = nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        print(f"  {label}epoch {epoch + 1}/{epochs}: loss {total / len(x):.4f}", flush=True)
    return net.eval()
