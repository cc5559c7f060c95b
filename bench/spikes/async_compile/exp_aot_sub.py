import time, torch, sys
sys.path.insert(0, "/work/main/compile")
torch._inductor.config.fx_graph_cache=False; torch._functorch.config.enable_autograd_cache=False
import torch._inductor.compile_fx as cfx
print("mode", cfx.fx_compile_mode, "async", cfx.fx_compile_async)
from blkmod import call
blk = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
x = torch.randn(4, 32)  # inference (no grad) to avoid the backward pickling bug
t=time.time()
try:
    fn = torch.compile(call, fullgraph=True).aot_compile(((blk, x), {}))
    print("aot_compile ok in %.1fs" % (time.time()-t), type(fn).__name__)
    serialize_aot = lambda f: type(f).serialize(f)
    print("serialized bytes:", len(serialize_aot(fn)))
except Exception as e:
    print("FAILED:", type(e).__name__, str(e).splitlines()[0][:200])
