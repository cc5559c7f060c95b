"""A job that knows nothing of kcache: stock torch.compile with PyTorch's own
remote caches (TORCHINDUCTOR_*_REMOTE_CACHE, TORCHINDUCTOR_REDIS_HOST/PORT)
set by the caller. Prints one JSON line: PyTorch's compile counters and its
remote-cache stats."""

import dataclasses
import json
import sys

import torch
from torch._dynamo.utils import counters
from torch._inductor import remote_cache

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
compiled = torch.compile(model)
x = torch.randn(8, 16, requires_grad=True)
compiled(x).sum().backward()
print(json.dumps({
    "inductor": {k: v for k, v in counters["inductor"].items() if "cache" in k},
    "aot_autograd": {k: v for k, v in counters["aot_autograd"].items() if "cache" in k},
    "remote": {k: dataclasses.asdict(v) for k, v in remote_cache.cache_stats._stats.items()},
}))
