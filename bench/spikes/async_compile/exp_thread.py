import os, sys, time, threading, statistics, torch
torch.set_num_threads(4)
torch._inductor.config.fx_graph_cache = False
torch._functorch.config.enable_autograd_cache = False
MODE = sys.argv[1]  # none | thread | process
D=256
def make(): 
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(D, 4, 4*D, batch_first=True, dropout=0.0)
def call(block, x):
    return block(x)
def compile_block(block, x):
    t=time.time()
    fn = torch.compile(call, fullgraph=True, backend="inductor").aot_compile(((block, x), {}))
    return fn, time.time()-t
def proc_main(q):
    torch.set_num_threads(4)
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    with torch.device("meta"): b = make()
    b = b.to_empty(device="cpu")  # no real weights needed
    x = torch.empty(8, 128, D, requires_grad=True)
    fn, dt = compile_block(b, x)
    q.put(("done", dt))
if __name__ == "__main__":
    blk = make(); x = torch.randn(8, 128, D, requires_grad=True)
    def step():
        y = blk(x); y.sum().backward()
    for _ in range(5): step()
    base=[]
    for _ in range(30):
        t=time.perf_counter(); step(); base.append(time.perf_counter()-t)
    res = {}
    if MODE=="thread":
        def bg():
            res["fn"], res["dt"] = compile_block(blk, x.detach().requires_grad_())
        th = threading.Thread(target=bg); t0=time.time(); th.start(); alive = th.is_alive
    elif MODE=="process":
        import multiprocessing as mp
        ctx = mp.get_context("spawn"); q = ctx.Queue()
        p = ctx.Process(target=proc_main, args=(q,)); t0=time.time(); p.start(); alive = p.is_alive
    else:
        t0=time.time(); alive = lambda: time.time()-t0 < 5
    during=[]
    while alive():
        t=time.perf_counter(); step(); during.append(time.perf_counter()-t)
    wall=time.time()-t0
    if MODE=="process": res["q"]=q.get(timeout=5) if not q.empty() else ("no result", p.exitcode)
    med=lambda v: statistics.median(v)*1e3
    print(f"{MODE}: base median {med(base):.1f} ms; during median {med(during):.1f} ms p90 {sorted(during)[int(.9*len(during))]*1e3:.1f} ms max {max(during)*1e3:.0f} ms; steps during {len(during)}; compile wall {wall:.1f}s", res.get("dt"), res.get("q"))
    if MODE=="thread":
        out = res["fn"](blk, x); ref = blk(x)
        print("thread-compiled fn matches eager:", torch.allclose(out, ref, atol=1e-4))
