"""Spike 2: the carried graph (kcache._torch_adaptor.graph_ship) compiled in
a child process with its own cache dir, then in this process from the same
bytes after restoring the child's capture: PyTorch's counters must show
AOTAutograd and FX-graph cache hits, and the landed graph's output must
equal the traced graph's on real inputs."""
import json, os, pickle, subprocess, sys, tempfile

import torch

from spike import Block


def child(path):
    from kcache import _torch_adaptor as adaptor
    out = []
    for blob in pickle.load(open(path, "rb")):
        gm, inputs, mode = adaptor.land_graph(blob)
        with adaptor.capture_region() as cap:
            adaptor.compile_landed(gm, inputs, mode, {})
        out.append((cap.mega_cache, cap.binaries))
    pickle.dump(out, open(path + ".out", "wb"))


def main():
    from kcache import _torch_adaptor as adaptor
    from torch._dynamo.utils import counters
    captured = []
    def backend(gm, ex):
        captured.append((gm, list(ex), adaptor.ship_graph(gm, ex)))
        return gm.forward
    from kcache.keys.fields import CompileSettings
    from kcache.keys.graph_key import region_key
    torch.manual_seed(0)
    if os.environ.get("SPIKE_MODEL") == "gpt2":
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block
        block = GPT2Block(GPT2Config(n_embd=64, n_head=4, n_layer=1, resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.0))
        block.mlp.c_proj.register_forward_pre_hook(lambda m, a: torch._dynamo.graph_break())
        x = torch.randn(2, 16, 64, requires_grad=True)
    else:
        block = Block()
        x = torch.randn(4, 8, 64, requires_grad=True)
    torch.compile(block, backend=backend)(x)
    keys = []
    for gm, ex, blob in captured:
        landed, inputs, _ = adaptor.land_graph(blob)
        keys.append(region_key(gm, ex, "b", CompileSettings())[0] == region_key(landed, inputs, "b", CompileSettings())[0])
    print("graphs", len(captured), "landed keys equal the traced ones:", keys)
    tmp = tempfile.mkdtemp()
    pickle.dump([b for _, _, b in captured], open(tmp + "/jobs", "wb"))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tmp + "/child-cache")
    subprocess.run([sys.executable, __file__, "child", tmp + "/jobs"], check=True, env=env)
    report = []
    for (gm, ex, blob), (mega, binaries) in zip(captured, pickle.load(open(tmp + "/jobs.out", "rb"))):
        adaptor.restore_region(mega, binaries)
        counters.clear()
        landed, inputs, mode = adaptor.land_graph(blob)
        compiled = adaptor.compile_landed(landed, inputs, mode, {})
        c = {k: {n: v for n, v in dict(counters[k]).items() if "cache" in n} for k in ("aot_autograd", "inductor")}
        got, want = compiled(*ex), gm(*ex)  # the traced inputs: their strides are what Dynamo guards
        same = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want))
        report.append({"counters": c, "same_output": bool(same), "bytes": len(blob)})
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    child(sys.argv[2]) if len(sys.argv) > 1 and sys.argv[1] == "child" else main()
