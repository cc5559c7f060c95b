"""AOTInductor regions through kcache, run by a C++ process with libtorch.

`python -m kcache.aoti_prewarm` compiles each distinct region of a GPT-2 /
Llama configuration and uploads it to a real kcache-server; the libtorch
program examples/cpp_regions (kcache-regions-run) fetches every package
through the C++ client and runs the model. Its logits are compared with the
Python eager model's; PyTorch's compile is proved absent in the C++
processes by a compiler wrapper on PATH that logs every call.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import stat
import subprocess

import pytest
import torch

from kc_testing import PYTHON, REPO, ServerProcess, python_env, seed_env
from harness.jobs import run_job

pytestmark = pytest.mark.slow

BUILD = pathlib.Path(os.environ.get("KCACHE_BUILD_DIR", REPO / "build/dev"))
RUNNER = BUILD / "examples/cpp_regions/kcache-regions-run"
LAYERS, HIDDEN, HEADS, VOCAB = 2, 64, 4, 256


def _env(**kcache: str) -> dict[str, str]:
    env = {k: v for k, v in python_env().items() if not k.startswith("KCACHE_")}
    env.update(kcache)
    seed_env(env)  # a node that knows its host facts (kc_testing.seed_node)
    return env


def _compiler_trap(tmp: pathlib.Path) -> tuple[str, pathlib.Path]:
    """A PATH whose g++/gcc/c++/cc log every call, and that log."""
    bin_dir, log = tmp / "trap-bin", tmp / "compiler-calls.log"
    bin_dir.mkdir(exist_ok=True)
    for name in ("g++", "gcc", "c++", "cc", "clang", "clang++"):
        p = bin_dir / name
        p.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexec /usr/bin/{name} "$@"\n')
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", log


def _eager_model(kind: str):
    from kcache.tools.aoti_prewarm import seeded_model

    return seeded_model(kind, LAYERS, HIDDEN, HEADS, seed=0)


def run_cpp(plan: pathlib.Path, env: dict[str, str], tmp: pathlib.Path, *extra: str,
            check: bool = True) -> subprocess.CompletedProcess:
    proc = run_job([str(RUNNER), "--plan", str(plan), *extra], timeout=300, env=env, cwd=tmp)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def prewarmed(request, tmp_path_factory):
    if not RUNNER.exists():
        pytest.fail(f"{RUNNER} is missing: scripts/build.sh builds it (KCACHE_BUILD_TORCH_EXAMPLES)")
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"aoti-{kind}")
    server = ServerProcess(tmp)
    plan = tmp / "plan"
    try:
        # Both entry points: kcache.tools.aoti_prewarm, and kcache.tools.prewarm --aoti.
        entry = ["kcache.aoti_prewarm", "--out", str(plan)] if kind == "gpt2" else \
            ["kcache.prewarm", "--aoti", str(plan)]
        out = run_job(
            [PYTHON, "-m", *entry, "--model", kind, "--layers", str(LAYERS),
             "--hidden", str(HIDDEN), "--heads", str(HEADS)],
            # Its own Inductor dir: the default one (/tmp/torchinductor_$USER)
            # outlives the run and would hand a later run its compiles.
            env=_env(KCACHE_URL=server.url, KCACHE_LOCAL_DIR=str(tmp / "prewarm-node"),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor-prewarm")),
            timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        # With a server, prewarm skips this host's node tier (a region found
        # there would never reach the server).
        assert not list((tmp / "prewarm-node").rglob("objects/*/*"))
        # A node tier holding every package, for the fault cases: what a C++
        # process leaves behind after fetching from the server.
        fill = run_job([str(RUNNER), "--plan", str(plan)],
                       timeout=300, env=_env(KCACHE_URL=server.url, KCACHE_LOCAL_DIR=str(tmp / "filled-node")))
        assert fill.returncode == 0, fill.stderr[-3000:]
        yield {"kind": kind, "tmp": tmp, "server": server, "plan": plan,
               "prewarm": json.loads(out.stdout.strip().splitlines()[-1]), "log": out.stdout}
    finally:
        server.stop()


# The fault cases need one model: GPT-2's prewarm (shared with the tests above).
GPT2_ONLY = pytest.mark.parametrize("prewarmed", ["gpt2"], indirect=True)


def test_cpp_matches_eager_and_a_second_process_compiles_nothing(prewarmed):
    """Over a minute for each model's first test: it pays that model's
    AOTInductor prewarm (export and compile of every region), which the
    module's other tests of the model share."""
    tmp, server, plan = prewarmed["tmp"], prewarmed["server"], prewarmed["plan"]
    # One package per distinct region: every block shares one.
    assert prewarmed["prewarm"]["regions"] == 3
    assert prewarmed["prewarm"]["stages"] == LAYERS + 2
    assert prewarmed["prewarm"]["kcache"]["compiles"] == 3
    assert prewarmed["prewarm"]["kcache"]["uploads"] == 3

    model = _eager_model(prewarmed["kind"])
    ids = torch.randint(0, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    torch.save({"input_ids": ids}, tmp / "ids.pt")
    path, trap_log = _compiler_trap(tmp)
    node = tmp / "cpp-node"
    before = server.metrics()
    first = run_cpp(plan, _env(KCACHE_URL=server.url, KCACHE_LOCAL_DIR=str(node), PATH=path), tmp,
                    "--input", "ids.pt", "--output", "logits.pt")
    report = json.loads(first.stdout)
    assert report["client"]["server_hits"] == 3 and report["client"]["compiles"] == 0
    assert report["stages"] == LAYERS + 2
    after = server.metrics()
    assert after["kcache_cache_hits_total"] - before["kcache_cache_hits_total"] == 3

    logits = torch.load(tmp / "logits.pt", weights_only=False)["logits"]
    with torch.no_grad():
        expected = model(ids).logits
    assert logits.shape == expected.shape
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)

    # A second process: every package from this node's tier, nothing compiled.
    second = json.loads(run_cpp(plan, _env(KCACHE_URL=server.url, KCACHE_LOCAL_DIR=str(node),
                                           PATH=path), tmp).stdout)
    assert second["client"]["node_hits"] == 3 and second["client"]["server_hits"] == 0
    assert second["client"]["compiles"] == 0 and second["client"]["refused"] == 0
    assert not trap_log.exists(), trap_log.read_text()


def test_python_and_cpp_agree_on_region_keys(prewarmed):
    """The plan's keys are what the Python region code computes; the C++
    program recomputes them from the fields and refuses an edited field."""
    plan_path = prewarmed["plan"] / "plan.json"
    plan = json.loads(plan_path.read_text())
    # In a fresh process, as a job would: this one's torch state (threads,
    # configs other tests touched) is not the job's.
    script = ("import json, kcache.aoti.region as r, kcache.aoti.stages as s, kcache.tools.aoti_prewarm as p;"
              f"m = p.seeded_model({prewarmed['kind']!r}, {LAYERS}, {HIDDEN}, {HEADS}, 0);"
              "print(json.dumps([r.export(x).key for x in s.stages_for(m)]))")
    out = run_job([PYTHON, "-c", script], timeout=300, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    keys = json.loads(out.stdout.strip().splitlines()[-1])
    assert keys == [s["key"] for s in plan["stages"]]
    assert len(set(keys[1:-1])) == 1  # identical blocks, one region
    for region in plan["regions"].values():
        assert json.loads(region["fields"]["mode"])["mode"] == "aoti"
        assert "/aoti/infer" in region["label"]

    edited = prewarmed["tmp"] / "edited-plan"
    shutil.copytree(prewarmed["plan"], edited, dirs_exist_ok=True)
    key = next(iter(plan["regions"]))
    plan["regions"][key]["fields"]["dtype"] += " "
    (edited / "plan.json").write_text(json.dumps(plan))
    proc = run_cpp(edited, _env(KCACHE_URL=prewarmed["server"].url), prewarmed["tmp"], check=False)
    assert proc.returncode == 2
    assert f"the plan says {key}" in proc.stderr


def _replanned(prewarmed, name: str, field: str, edit) -> pathlib.Path:
    """A copy of the plan with one region's key field edited and the region
    re-keyed to match (so the key check passes and the next check speaks)."""
    from kcache import _core

    plan = json.loads((prewarmed["plan"] / "plan.json").read_text())
    old = plan["stages"][1]["key"]  # a block's region
    region = plan["regions"].pop(old)
    region["fields"][field] = edit(region["fields"][field])
    new = _core.compute_key({k: v.encode() for k, v in region["fields"].items()})
    plan["regions"][new] = region
    for stage in plan["stages"]:
        if stage["key"] == old:
            stage["key"] = new
    out = prewarmed["tmp"] / name
    shutil.copytree(prewarmed["plan"], out, dirs_exist_ok=True)
    (out / "plan.json").write_text(json.dumps(plan))
    return out


def _with_torch(toolchain: str, version: str) -> str:
    fields = json.loads(toolchain)
    fields["torch"] = version
    return json.dumps(fields, sort_keys=True)


def _with_isa(target: str, isa: str) -> str:
    fields = json.loads(target)
    fields["isa"] = isa
    return json.dumps(fields, sort_keys=True)


@GPT2_ONLY
def test_a_region_from_another_torch_or_an_unknown_isa_is_refused(prewarmed):
    env = _env(KCACHE_URL=prewarmed["server"].url, KCACHE_LOCAL_DIR=str(prewarmed["tmp"] / "filled-node"))
    # Positive control: the re-keyed plan itself passes every check and runs.
    same = _replanned(prewarmed, "same-plan", "toolchain", lambda t: t)
    assert run_cpp(same, env, prewarmed["tmp"], check=False).returncode == 0
    older = _replanned(prewarmed, "torch-plan", "toolchain", lambda t: _with_torch(t, "2.12.0"))
    proc = run_cpp(older, env, prewarmed["tmp"], check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    linked = torch.__version__.split("+")[0]  # the runner links this venv's libtorch
    assert f"was compiled by torch 2.12.0; this program links libtorch {linked}" in proc.stderr
    alien = _replanned(prewarmed, "isa-plan", "target", lambda t: _with_isa(t, "avx2 quantum_vec"))
    proc = run_cpp(alien, env, prewarmed["tmp"], check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "this CPU lacks (or kcache does not know) quantum_vec" in proc.stderr


def test_the_compiler_trap_catches_a_compiler_call(tmp_path):
    # Positive control for every "no compiler ran" assertion in this file.
    path, log = _compiler_trap(tmp_path)
    subprocess.run(["g++", "--version"], env=dict(os.environ, PATH=path), capture_output=True, check=True)
    assert log.read_text().startswith("g++ --version")


def _node_with_one_bundle_changed(prewarmed, name: str, change) -> tuple[pathlib.Path, str]:
    """A copy of the prewarm node tier with one region's stored bundle changed."""
    node = prewarmed["tmp"] / name
    shutil.copytree(prewarmed["tmp"] / "filled-node", node)
    plan = json.loads((prewarmed["plan"] / "plan.json").read_text())
    key = plan["stages"][1]["key"]  # the block region
    path = node / "objects" / key[:2] / key
    path.write_bytes(change(path.read_bytes(), key))
    return node, plan["regions"][key]["label"]


@GPT2_ONLY
def test_a_tampered_package_is_refused_before_it_is_loaded(prewarmed):
    from kcache import _core

    def flip(data: bytes, _key: str) -> bytes:
        i = len(data) // 2
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]

    def repack(data: bytes, key: str) -> bytes:
        # A well-formed bundle for the right key whose package bytes differ
        # from what its manifest says (a bundle writer gone wrong).
        manifest, sections, _ = _core.read_bundle(data, expected_key=key, trusted_keys=[],
                                                  require_signature=False)
        sections = [(n, p[:-1] + bytes([p[-1] ^ 1]) if n == "aoti/package.pt2" else p)
                    for n, p in sections]
        return _core.write_bundle(manifest, sections, None)

    path, trap_log = _compiler_trap(prewarmed["tmp"])
    node, label = _node_with_one_bundle_changed(prewarmed, "flipped-node", flip)
    proc = run_cpp(prewarmed["plan"], _env(KCACHE_LOCAL_DIR=str(node), PATH=path),
                   prewarmed["tmp"], check=False)
    assert proc.returncode == 2
    assert label in proc.stderr and "python -m kcache.aoti_prewarm" in proc.stderr

    node, label = _node_with_one_bundle_changed(prewarmed, "repacked-node", repack)
    proc = run_cpp(prewarmed["plan"], _env(KCACHE_LOCAL_DIR=str(node), PATH=path),
                   prewarmed["tmp"], check=False)
    assert proc.returncode == 2
    assert f"package of {label} does not match its manifest" in proc.stderr
    assert not trap_log.exists()


@GPT2_ONLY
def test_unreachable_server_falls_back_to_the_node_tier(prewarmed):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    node = prewarmed["tmp"] / "fallback-node"
    shutil.copytree(prewarmed["tmp"] / "filled-node", node)
    report = json.loads(run_cpp(prewarmed["plan"], _env(KCACHE_URL=dead, KCACHE_LOCAL_DIR=str(node)),
                                prewarmed["tmp"]).stdout)
    assert report["client"]["node_hits"] == 3 and report["client"]["compiles"] == 0


@GPT2_ONLY
def test_an_empty_node_tier_names_every_missing_region(prewarmed):
    empty = prewarmed["tmp"] / "empty-node"
    proc = run_cpp(prewarmed["plan"], _env(KCACHE_LOCAL_DIR=str(empty)), prewarmed["tmp"], check=False)
    assert proc.returncode == 2
    plan = json.loads((prewarmed["plan"] / "plan.json").read_text())
    for key, region in plan["regions"].items():
        assert f"{region['label']} {key}" in proc.stderr
    assert plan["prewarm_command"] in proc.stderr
    assert "--model gpt2" in plan["prewarm_command"]


@GPT2_ONLY
def test_trust_unsigned_packages_are_refused_signed_ones_run(prewarmed):
    from kcache import _core

    priv, pub = _core.generate_signing_key()
    tmp = prewarmed["tmp"]
    (tmp / "trusted.pem").write_text(pub)
    plan = json.loads((prewarmed["plan"] / "plan.json").read_text())
    unsigned = tmp / "unsigned-node"
    shutil.copytree(tmp / "filled-node", unsigned)
    trust = {"KCACHE_TRUSTED_KEYS": str(tmp / "trusted.pem")}
    proc = run_cpp(prewarmed["plan"], _env(KCACHE_LOCAL_DIR=str(unsigned), **trust), tmp, check=False)
    assert proc.returncode == 2
    assert all(r["label"] in proc.stderr for r in plan["regions"].values())

    signed = tmp / "signed-node"
    shutil.copytree(tmp / "filled-node", signed)
    for key in plan["regions"]:
        path = signed / "objects" / key[:2] / key
        manifest, sections, _ = _core.read_bundle(path.read_bytes(), expected_key=key,
                                                  trusted_keys=[], require_signature=False)
        path.write_bytes(_core.write_bundle(manifest, sections, priv))
    report = json.loads(run_cpp(prewarmed["plan"], _env(KCACHE_LOCAL_DIR=str(signed), **trust), tmp).stdout)
    assert report["client"]["node_hits"] == 3 and report["client"]["refused"] == 0
