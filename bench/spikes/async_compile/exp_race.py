import threading, time, traceback, torch
torch.set_num_threads(1)
torch._dynamo.config.cache_size_limit = 64  # main thread only (ContextVar)
def call(block, x): return block(x)
errs=[]; done=[]
def bg():
    try:
        for i in range(6):
            blk = torch.nn.Sequential(torch.nn.Linear(32+i, 64), torch.nn.GELU(), torch.nn.Linear(64, 32+i))
            x = torch.randn(4, 32+i, requires_grad=True)
            fn = torch.compile(call, fullgraph=True).aot_compile(((blk, x), {}))
            assert torch.allclose(fn(blk, x), blk(x), atol=1e-5)
            done.append(i)
    except Exception as e:
        errs.append("bg: " + repr(e)[:300]); traceback.print_exc()
m = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()), dynamic=False)
th = threading.Thread(target=bg); th.start()
n=0
try:
    while th.is_alive():
        for b in range(1, 9):
            x = torch.randn(b, 16, requires_grad=True); m(x).sum().backward(); n+=1
except Exception as e:
    errs.append("main: " + repr(e)[:300]); traceback.print_exc()
th.join()
print("bg compiled", done, "main steps", n, "errors", errs)
print("main recompiles visible:", torch._dynamo.utils.counters["stats"]["unique_graphs"])
