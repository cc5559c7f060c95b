import sys, threading, time, traceback, torch
torch.set_num_threads(1)
def call(block, x): return block(x)
WHAT = sys.argv[1]
errs=[]; done=[]
def bg():
    try:
        for i in range(4):
            blk = torch.nn.Sequential(torch.nn.Linear(32+i, 64), torch.nn.GELU(), torch.nn.Linear(64, 32+i))
            x = torch.randn(4, 32+i, requires_grad=True)
            fn = torch.compile(call, fullgraph=True).aot_compile(((blk, x), {}))
            done.append(i)
    except Exception as e:
        errs.append("bg: " + repr(e)[:200])
mod = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
x = torch.randn(8, 16, requires_grad=True)
if WHAT == "jit":
    m = torch.compile(mod); f = lambda: m(x)
else:
    aot = torch.compile(call, fullgraph=True).aot_compile(((mod, x), {})); f = lambda: aot(mod, x)
f().sum().backward()  # warm
th = threading.Thread(target=bg); th.start(); n=0
while th.is_alive():
    try:
        f().sum().backward(); n+=1
    except Exception as e:
        errs.append("main: " + repr(e)[:120]); break
th.join()
print(WHAT, "bg compiled", done, "main steps", n, "errors", errs)
