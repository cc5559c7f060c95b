"""The traced path's training job (examples/train_regional.py with
KCACHE_PRECOMPILED=0 and transformers' KV cache on), and one cold run of it
per pytest process, shared by every test that needs a warm start from it.

The cold run uploads to a real kcache-server (stopped afterwards) and
publishes to its node directory; a test copies whichever it needs
(`copy_node`, `copy_storage`) so that nothing it changes reaches another
test. The tests that use it are in one module (test_cold_warm.py): the
test command distributes modules to pytest-xdist's workers whole
(--dist loadscope), so one worker runs the cold compile once for all."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil

import pytest

from kc_testing import HOST_FACTS, PYTHON, REPO, ServerProcess, python_env, write_cxx_wrapper
from harness import jobs

JOB = str(REPO / "examples" / "train_regional.py")
# Three blocks: one region compiled once and reused twice in-process.
LAYERS = 3


def is_build(cmdline: str) -> bool:
    """Any host-compiler run that builds something (not -E, not a --help query)."""
    return " -E " not in f" {cmdline} " and "--help" not in cmdline


def is_region_compile(cmdline: str) -> bool:
    """A host-compiler run that builds one of the model's kernels.

    Not counted: kcache's `-march=native -Q --help=target` query (the target
    key field), Inductor's per-cache-dir ISA probes (tiny *_chk_kernel
    programs it builds once per Inductor cache directory, independent of any
    model) and the preprocessor pass (-E) of the shared kernel header.
    """
    if " -E " in f" {cmdline} " or "--help" in cmdline:
        return False  # preprocessing, or kcache's own -march=native query
    srcs = [w for w in cmdline.split() if w.endswith(".cpp")]
    for src in srcs:
        try:
            text = pathlib.Path(src).read_text()
        except OSError:
            return True
        if "_chk_kernel" in text:
            return False
    return True


def run_job(tmp_path: pathlib.Path, wrapper: pathlib.Path, name: str, *extra: str,
            node: pathlib.Path, url: str | None = None) -> dict:
    """One job in a fresh container: its own Inductor directory and temp
    directory (where PyTorch keeps its precompiled kernel header), the
    node directory `node`, and the server `url` if given."""
    log = tmp_path / f"cxx-{name}.log"
    tmp = tmp_path / f"tmp-{name}"
    tmp.mkdir(exist_ok=True)
    env = python_env(KCACHE_LOCAL_DIR=str(node), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"),
                     CXX=str(wrapper), KCACHE_TEST_CXX_LOG=str(log), KCACHE_PRECOMPILED="0",
                     TMPDIR=str(tmp))
    if url:
        env["KCACHE_URL"] = url
    # --kv-cache: transformers' default, where Dynamo traces every block
    # (layer_idx is read) and kcache reuses the region's artifact in-process.
    out = jobs.run_job([PYTHON, JOB, "--layers", str(LAYERS), "--steps", "2", "--kv-cache", *extra],
                       timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    lines = log.read_text().splitlines() if log.exists() else []
    result["region_compiles"] = [l for l in lines if is_region_compile(l)]
    result["builds"] = [l for l in lines if is_build(l)]
    result["header_builds"] = [l for l in lines if ".gch" in l or ".pch" in l]
    return result


@dataclasses.dataclass(frozen=True)
class Cold:
    result: dict               # the cold job's JSON line, with its compiler runs
    node: pathlib.Path         # its node directory (do not change: copy_node)
    storage: pathlib.Path      # the stopped server's disk storage (copy_storage)
    wrapper: pathlib.Path      # the CXX every run that should hit must use (it is in the key)

    def copy_node(self, dest: pathlib.Path) -> pathlib.Path:
        shutil.copytree(self.node, dest)  # keeps the 0700 mode the node tier's trust check wants
        return dest

    def copy_storage(self, dest: pathlib.Path) -> pathlib.Path:
        shutil.copytree(self.storage, dest)
        return dest


@pytest.fixture(scope="session")
def traced_cold(tmp_path_factory) -> Cold:
    tmp = tmp_path_factory.mktemp("traced-cold")
    wrapper = write_cxx_wrapper(tmp)
    server = ServerProcess(tmp)
    seed, HOST_FACTS["seed"] = HOST_FACTS["seed"], False  # a fresh node (its users, test_cold_warm, are fresh_node)
    try:
        result = run_job(tmp, wrapper, "cold", node=tmp / "node", url=server.url)
    finally:
        HOST_FACTS["seed"] = seed
        server.stop()
    return Cold(result, tmp / "node", tmp / "server-data", wrapper)
