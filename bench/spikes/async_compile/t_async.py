import os, time, torch
import torch._inductor.compile_fx as cfx
print("mode", cfx.fx_compile_mode, "async", cfx.fx_compile_async)
calls = []
orig = cfx._InProcessFxCompile.codegen_and_compile
def wrap(self, gm, *a, **k):
    import multiprocessing
    t=time.time(); r = orig(self, gm, *a, **k); calls.append((os.getpid(), time.time()-t, type(r).__name__)); return r
cfx._InProcessFxCompile.codegen_and_compile = wrap
torch._inductor.config.fx_graph_cache=False
torch._functorch.config.enable_autograd_cache=False
class Blk(torch.nn.Module):
    def __init__(s): super().__init__(); s.l=torch.nn.Linear(64,64)
    def forward(s,x):
        for _ in range(50): x = torch.nn.functional.gelu(s.l(x))+x*0.5
        return x
m=Blk(); c=torch.compile(m)
from torch._inductor.compile_fx_async import _AsyncFxCompile
t0=time.time()
for i in range(400):
    x=torch.randn(8,64,requires_grad=True)
    t=time.time(); y=c(x); y.sum().backward(); dt=time.time()-t
    if i<3 or i%50==0: print(i, f"{dt:.3f}s", "eager",_AsyncFxCompile._stat_eager_runs,"compiled",_AsyncFxCompile._stat_compiled_runs, flush=True)
    if _AsyncFxCompile._stat_compiled_runs>=2: print("switched at iter",i, f"{time.time()-t0:.1f}s"); break
    time.sleep(0.02)
print("inprocess calls in main pid", os.getpid(), calls)
