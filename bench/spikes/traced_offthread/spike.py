"""Spike: can a Dynamo graph, captured on the training thread, be compiled
by Inductor in another process so that the training process's own compile
of the same graph then hits AOTAutograd's and the FX graph cache?

main: captures the graphs of a block whose submodule has a graph-breaking
hook (as DeepSpeed ZeRO 3's do), ships each one (code + picklable node
meta + Dynamo's sources) to a child process with its own cache dir, which
compiles it inside kcache's capture; the main process restores the bundle
into a fresh cache dir and compiles the original graph: PyTorch's counters
say whether it hit.
"""
import os, pickle, subprocess, sys, tempfile, json

import torch

KEEP = ("stack_trace", "nn_module_stack", "source_fn_stack", "tensor_dict", "seq_nr",
        "original_aten", "from_node", "torch_fn", "is_wrapped")


def ship(gm, example_inputs) -> bytes:
    fn, args = gm.__reduce__()
    meta = {}
    for node in gm.graph.nodes:
        m = {}
        for k in KEEP:
            if k in node.meta:
                try:
                    pickle.dumps(node.meta[k]); m[k] = node.meta[k]
                except Exception as e:
                    print("unpicklable", k, type(e).__name__)
        if node.op == "placeholder":
            m["_dynamo_source"] = getattr(node, "_dynamo_source", None)
        meta[node.name] = m
    gmeta = {k: v for k, v in gm.meta.items() if k in ("dynamo_compile_id",)}
    inputs = [("t", tuple(t.shape), t.stride(), str(t.dtype), t.requires_grad, t.device.type) if isinstance(t, torch.Tensor) else ("v", t) for t in example_inputs]
    return pickle.dumps({"reduce": (fn, args), "meta": meta, "gmeta": gmeta,
                         "param_name_to_source": getattr(gm, "_param_name_to_source", None),
                         "inputs": inputs})


def land(blob: bytes):
    d = pickle.loads(blob)
    fn, args = d["reduce"]
    gm = fn(*args)
    missing = []
    for node in gm.graph.nodes:
        m = d["meta"].get(node.name)
        if m is None:
            missing.append(node.name); continue
        src = m.pop("_dynamo_source", "absent")
        if node.op == "placeholder" and src != "absent":
            node._dynamo_source = src
        node.meta.update(m)
    gm.meta.update(d["gmeta"])
    if d["param_name_to_source"] is not None:
        gm._param_name_to_source = d["param_name_to_source"]
    gm.recompile()
    ex = []
    for i in d["inputs"]:
        if i[0] == "t":
            _, shape, stride, dtype, rg, dev = i
            t = torch.empty_strided(shape, stride, dtype=getattr(torch, dtype.split(".")[1]), device=dev)
            t.normal_() if t.is_floating_point() else t.zero_()
            ex.append(t.requires_grad_(rg))
        else:
            ex.append(i[1])
    return gm, ex, missing


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(64)
        self.up = torch.nn.Linear(64, 256)
        self.down = torch.nn.Linear(256, 64)
        def hook(mod, args):  # a ZeRO-3 stand-in: breaks the graph
            torch._dynamo.graph_break()
        self.down.register_forward_pre_hook(hook)

    def forward(self, x):
        h = self.up(self.ln(x))
        return x + self.down(torch.nn.functional.gelu(h))


def offline_compile(gm, ex, patches):
    """compile_fx as standalone_compile runs it: a tracing context of its
    own whose fake mode has a fresh ShapeEnv (PyTorch's caches bypass a
    compile with none), shapes taken from the example inputs."""
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    ctx = torch._guards.TracingContext(FakeTensorMode(shape_env=ShapeEnv()))
    with torch._guards.tracing(ctx), torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
        return compile_fx(gm, ex, config_patches=patches or None, ignore_shape_env=True)


def child(path):
    sys.path.insert(0, os.path.dirname(__file__) + "/../../../compile")
    from kcache import _torch_adaptor as adaptor
    blobs = pickle.load(open(path, "rb"))
    out = []
    for blob in blobs:
        gm, ex, missing = land(blob)
        with adaptor.capture_region() as cap:
            offline_compile(gm, ex, {})
        out.append((cap.mega_cache, cap.binaries, missing))
    pickle.dump(out, open(path + ".out", "wb"))


def main():
    from kcache import _torch_adaptor as adaptor
    from torch._dynamo.utils import counters
    captured = []
    def backend(gm, ex):
        captured.append((gm, ex))
        return gm.forward
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(4, 8, 64, requires_grad=True)
    torch.compile(block, backend=backend)(x)
    print("graphs:", len(captured))
    blobs = [ship(gm, ex) for gm, ex in captured]
    tmp = tempfile.mkdtemp()
    with open(tmp + "/jobs", "wb") as f:
        pickle.dump(blobs, f)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tmp + "/child-cache")
    subprocess.run([sys.executable, __file__, "child", tmp + "/jobs"], check=True, env=env)
    results = pickle.load(open(tmp + "/jobs.out", "rb"))
    report = []
    for (gm, ex), (mega, binaries, missing) in zip(captured, results):
        adaptor.restore_region(mega, binaries)
        counters.clear()
        compiled = offline_compile(gm, ex, {})
        c = {k: dict(v) for k, v in counters.items() if k in ("aot_autograd", "inductor")}
        same = torch.allclose(compiled(*ex)[0], gm(*ex)[0], atol=1e-5)
        report.append({"missing_names": missing, "counters": c, "same_output": bool(same),
                       "mega_bytes": len(mega or b""), "binaries": len(binaries)})
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main()
