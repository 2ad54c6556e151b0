"""an_train_healthy: a healthy PyTorch CPU training loop for `memscope analyze leaks` (issue 47).

    /usr/bin/python3 an_train_healthy.py [STEPS=30]

A small CNN on a random image dataset read through DataLoader(num_workers=2) (prefetched
batches in flight), AdamW, OneCycleLR (per-step cyclic garbage that the collector frees later),
STEPS optimizer steps. Nothing is kept from step to step: its memory does not grow. Prints
"an_train_healthy ok" and exits 0.
"""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), int(i % 10)


def main(steps):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=steps)
    loader = DataLoader(Images(16 * steps), batch_size=16, num_workers=2)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    print("an_train_healthy ok")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
