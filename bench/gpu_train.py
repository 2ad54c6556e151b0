"""gpu_train.py: the PyTorch CUDA workload of bench/gpu-verify.sh (run on a GPU machine). A small
MLP trained for 20 steps with AdamW (cuBLAS workspaces, optimizer state), then an induced OOM
that is caught, then the allocator's own figures written to argv[1] as JSON for the checks.
No memscope import: everything memscope records here it records with no change to the script."""
import json
import sys

import torch

dev = torch.device("cuda:0")
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(20):
    x = torch.randn(256, 1024, device=dev)
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
oom = False
try:
    free, total = torch.cuda.mem_get_info()
    torch.empty(int(total * 2), dtype=torch.uint8, device=dev)
except torch.cuda.OutOfMemoryError:
    oom = True
torch.cuda.synchronize()
with open(sys.argv[1], "w") as f:
    json.dump({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
               "oom_caught": oom, "torch": torch.__version__}, f)
