"""Cold start without waiting (kcache.background, docs/cold-start.md),
against a real kcache-server, with real torch.compile in a real compile
worker process.

- A cold job's blocks run eagerly while its compile worker builds their
  region, then switch: PyTorch's own step log shows no Dynamo trace of
  kcache's entry in the job's process (the compile ran elsewhere), the CXX
  wrapper logs the worker's kernel builds (positive control), the server
  counts the worker's lease and upload, and every step's loss agrees with
  an eager copy's to 1e-4; the server's metrics count the rank's eager
  calls, switches and the worker's compile seconds. A restart (fresh container, everything stored)
  has no eager phase and builds nothing.
- Two cold ranks, two distinct regions: while rank A's worker is held in
  its compile (a gate in the CXX wrapper: the test waits on events, never
  on a clock), rank B's worker finds that region leased and takes the other
  one; each region is compiled once cluster-wide.
- Faults: a worker killed in its compile, a worker past its deadline or
  its memory bound: the region stays eager, the job finishes with eager's
  losses, the fault is counted.
- compile_regions_in_place: blocks run their own _call_impl while eager,
  then switch; a block whose class lives in __main__ is compiled on the
  training thread (counted as a refusal).
- The pieces: the non-waiting single flight of the C++ client, the
  skeleton's key agreeing with the live block's, the mode's default.

The rest of the suite pins KCACHE_COLD_START=wait (tests/python/conftest.py);
here the default runs (KCACHE_COLD_START empty).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import threading
import time

import pytest
from harness.jobs import finish_job, start_job
import torch

from kc_testing import PYTHON, ServerProcess, python_env

JOB = str(pathlib.Path(__file__).with_name("background_job.py"))
# The fault tests' model: two small kinds of block (tests/models/blocks.py),
# no transformers import; what they prove does not depend on the model.
SMALL = ("--model", "two-kinds", "--layers", "2")


@contextlib.contextmanager
def served(tmp_path):
    srv = ServerProcess(tmp_path)
    try:
        yield srv
    finally:
        srv.stop()


def start(tmp_path, cxx, name, url, *extra, cold_start: str = "", **env):
    """The job, in the default cold-start mode (or `cold_start`)."""
    wrapper, _ = cxx
    tmp = tmp_path / f"tmp-{name}"
    tmp.mkdir(exist_ok=True)
    # One intra-op thread: a core of this machine is left for the worker
    # (kcache/background/placement.py), as a GPU job leaves the host's.
    e = python_env(**{"KCACHE_URL": url, "KCACHE_COLD_START": cold_start,
                      "KCACHE_LOCAL_DIR": str(tmp_path / f"node-{name}"),
                      "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor-{name}"), "CXX": str(wrapper),
                      "KCACHE_TEST_CXX_LOG": str(tmp_path / f"cxx-{name}.log"), "OMP_NUM_THREADS": "1",
                      "TMPDIR": str(tmp), **env})
    return start_job([PYTHON, JOB, *extra], env=e)


def finish(proc, tmp_path, name) -> dict:
    done = finish_job(proc, 900)
    stdout, stderr = done.stdout, done.stderr
    assert proc.returncode == 0, stderr[-4000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    (tmp_path / f"job-{name}.json").write_text(json.dumps({**out, "stderr": stderr}))  # for a failure's reader
    log = tmp_path / f"cxx-{name}.log"
    out["builds"] = [l for l in (log.read_text().splitlines() if log.exists() else []) if "--help" not in l]
    out["stderr"] = stderr
    return out


def entry_traces(out: dict) -> list[str]:
    return [t for t in out["dynamo_traced"] if "precompiled/entries.py" in t]


def assert_close_to_eager(out: dict) -> None:
    assert len(out["losses"]) == len(out["eager_losses"])
    for i, (a, b) in enumerate(zip(out["losses"], out["eager_losses"])):
        assert abs(a - b) <= 1e-4, f"step {i}: kcache {a!r} vs eager {b!r}"


def leases(srv) -> list[dict]:
    status, _, body = srv.http("GET", "/v1/leases")
    assert status == 200, body
    return json.loads(body)["leases"]


def regions_stored(srv) -> float:
    """Uploads stored that are regions: not the compile workers' kernel
    libraries (mode "kernel") nor machine facts (mode "-")."""
    status, _, body = srv.http("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("kcache_stored_by_mode_total{") and 'mode="kernel"' not in line \
                and 'mode="-"' not in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(what, predicate, proc=None, timeout=600):
    """Waits on an event (a lease held, a file written); the timeout only
    stops a broken run from hanging the suite."""
    end = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the job ended before {what}: {proc.stderr.read()[-3000:]}")
        assert time.monotonic() < end, f"never saw {what}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.fresh_node  # a new machine type: its ISA probes go to the worker too
def test_cold_job_runs_eagerly_switches_and_restarts_without_an_eager_phase(tmp_path, cxx_wrapper):
    with served(tmp_path) as srv:
        cold = finish(start(tmp_path, cxx_wrapper, "cold", srv.url, "--layers", "2", "--steps", "2",
                            "--until-switched"), tmp_path, "cold")
        k = cold["kcache"]
        assert cold["mode"] == "background"  # the default with a server
        assert 0 not in cold["compiled_steps"] and k["eager_block_calls"] >= 2  # the first step ran eagerly
        assert cold["compiled_steps"] and cold["compiled_steps"][-1] == len(cold["losses"]) - 1
        assert k["background_jobs"] >= 1 and k["regions_switched"] == k["background_jobs"]
        assert k["background_faults"] == 0 and k["background_refusals"] == 0
        assert k["isa_probes_run"] == 0  # the worker probed the machine, not the training thread
        assert k["background_compile_seconds"] > 0  # the worker compiled (positive control)...
        assert cold["builds"], "the worker's kernel builds"
        assert entry_traces(cold) == []  # ...and this process traced nothing
        assert k["precompiled_blocks"] >= 2 and k["hits_node"] + k["hits_server"] >= 1
        assert all(j["state"] == "switched" and j["by"] == "this rank's worker" for j in cold["timeline"])
        assert all(j["worker_peak_rss_mb"] > 100 for j in cold["timeline"])  # the worker's own report
        m = srv.metrics()
        assert m["kcache_leases_granted_total"] >= 1 and m["kcache_uploads_total"] >= 2
        # The server's metrics say what the rank saw (its reports, POST /v1/cold-start).
        assert m["kcache_eager_block_calls_total"] == k["eager_block_calls"]
        assert m["kcache_regions_switched_total"] == k["regions_switched"]
        assert m["kcache_background_compile_seconds_total"] == pytest.approx(k["background_compile_seconds"],
                                                                             abs=0.01)
        assert_close_to_eager(cold)

        warm = finish(start(tmp_path, cxx_wrapper, "warm", srv.url, "--layers", "2", "--steps", "3"),
                      tmp_path, "warm")
        w = warm["kcache"]
        assert w["eager_block_calls"] == 0 and w["background_jobs"] == 0
        assert w["isa_probes_run"] == 0 and w["machine_facts_hits"] == 1  # the worker's record
        assert warm["compiled_steps"] == [0, 1, 2]
        assert w["hits_server"] >= 1 and warm["builds"] == [] and entry_traces(warm) == []
        assert_close_to_eager(warm)


@pytest.mark.slow
def test_a_cpu_job_whose_threads_take_every_core_waits_by_default(tmp_path, cxx_wrapper):
    """The default with a server, on a CPU job whose intra-op threads use
    every core it may run on: no worker would have a core of its own, and
    wait is the mode that compiles with the most steps there
    (bench/coldstart/REPORT_placement.md), so the block compiles in its
    first call; said once, with the override."""
    cores = len(os.sched_getaffinity(0))
    with served(tmp_path) as srv:
        out = finish(start(tmp_path, cxx_wrapper, "shared", srv.url, *SMALL, "--steps", "2",
                           OMP_NUM_THREADS=str(cores)), tmp_path, "shared")
        m = srv.metrics()
    k = out["kcache"]
    assert k["background_jobs"] == 0 and k["eager_block_calls"] == 0 and out["timeline"] == []
    assert out["compiled_steps"] == [0, 1] and k["precompiled_blocks"] >= 2
    assert entry_traces(out) and out["builds"]  # compiled in this process (the positive control)
    said = [line for line in out["stderr"].splitlines() if "cold start for blocks on cpu: wait" in line]
    assert len(said) == 1 and "KCACHE_COLD_START=background" in said[0] and f"all {cores} cores" in said[0], said
    assert m["kcache_uploads_total"] >= 2 and m["kcache_eager_block_calls_total"] == 0
    assert_close_to_eager(out)


@pytest.mark.slow
def test_two_cold_ranks_compile_different_regions_at_once(tmp_path, cxx_wrapper):
    gate = tmp_path / "gate"
    gate.write_text("held")
    with served(tmp_path) as srv:
        a = start(tmp_path, cxx_wrapper, "a", srv.url, "--model", "two-kinds", "--layers", "2",
                  "--steps", "1", "--until-switched", KCACHE_TEST_CXX_GATE=str(gate))
        wait_for("rank A's worker holding a lease", lambda: len(leases(srv)) == 1, a)
        held_by_a = leases(srv)[0]
        assert "compile worker" in held_by_a["holder"]  # the web page's "who compiles what"
        b = start(tmp_path, cxx_wrapper, "b", srv.url, "--model", "two-kinds", "--layers", "2",
                  "--steps", "1", "--until-switched")
        # B's worker found A's region leased and took the other one: it
        # compiles and stores it while A's compile is still held.
        wait_for("rank B's region stored", lambda: regions_stored(srv) >= 2, b)
        assert any(l["key"] == held_by_a["key"] for l in leases(srv)), "A's compile is still held"
        gate.unlink()
        ra, rb = finish(a, tmp_path, "a"), finish(b, tmp_path, "b")
    for r in (ra, rb):
        k = r["kcache"]
        assert k["regions_switched"] == k["background_jobs"] >= 2
        assert k["background_faults"] == 0 and k["background_refusals"] == 0
        assert_close_to_eager(r)
    by_a = {j["key"] for j in ra["timeline"] if j["by"] == "this rank's worker"}
    by_b = {j["key"] for j in rb["timeline"] if j["by"] == "this rank's worker"}
    assert by_a and by_b and not by_a & by_b  # each compiled its own region, once cluster-wide
    assert held_by_a["key"] in {j["key"] for j in ra["timeline"]}
    assert rb["kcache"]["client"]["lease_busy"] == 0  # B's rank itself never asked for a lease


def dead(pid: int) -> bool:
    """Gone, or a zombie whose threads have all exited: only then does the
    parent's waitpid see it. A killed multi-threaded worker's main thread
    shows Z while its other threads are still exiting (seen on a loaded
    machine: the job's next two steps, 10 ms apart, polled before its
    waitpid could see the death, and the test failed)."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status and "\nThreads:\t1\n" in status


def worker_pids(job_pid: int) -> list[int]:
    out = []
    for d in pathlib.Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"PPid:\t{job_pid}\n" in (d / "status").read_text() and \
                        b"compile_worker" in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                continue
    return out


@pytest.mark.slow
def test_a_killed_worker_leaves_the_region_eager_and_the_losses_right(tmp_path, cxx_wrapper):
    gate, pause = tmp_path / "gate", tmp_path / "pause"
    gate.write_text("held")
    pause.write_text("held")
    with served(tmp_path) as srv:
        job = start(tmp_path, cxx_wrapper, "k", srv.url, *SMALL, "--steps", "3",
                    "--pause-file", str(pause), KCACHE_TEST_CXX_GATE=str(gate))
        wait_for("the worker compiling", lambda: len(leases(srv)) == 1, job)
        # Held in g++ (the wrapper logs a run before it waits at the gate):
        # past its lease, the worker has told the rank which region it
        # compiles. Killed between the two, the rank could not tell, and
        # orphaned every region in the worker's hands (seen on a loaded machine).
        cxx_log = tmp_path / "cxx-k.log"
        wait_for("the worker in the host compiler", lambda: cxx_log.exists() and cxx_log.read_text().strip(), job)
        (pid,) = worker_pids(job.pid)
        os.kill(pid, signal.SIGKILL)
        wait_for("the worker's death", lambda: dead(pid), job)  # before the job's next step looks
        gate.unlink()
        pause.unlink()
        out = finish(job, tmp_path, "k")
    k = out["kcache"]
    states = [j["state"] for j in out["timeline"]]
    # The region in the killed worker's hands stays eager; the model's other
    # regions went to a new worker.
    steps = [l for l in out["stderr"].splitlines() if l.startswith("background_job:")]
    assert k["background_faults"] == 1 and states.count("orphaned") == 1 and len(states) > 1, \
        (f"killed {pid}", steps, out["timeline"], out["stderr"][-2000:])
    assert out["compiled_steps"] == [] and k["eager_block_calls"] >= 6
    assert "compile worker exited" in out["stderr"]
    assert_close_to_eager(out)


@pytest.mark.slow
@pytest.mark.parametrize("bound", ["deadline", "memory"])
def test_a_worker_past_its_bound_is_stopped(tmp_path, cxx_wrapper, bound):
    gate = tmp_path / "gate"
    gate.write_text("held")
    env = {"KCACHE_WORKER_DEADLINE_S": "1"} if bound == "deadline" else {"KCACHE_WORKER_MAX_RSS_MB": "50"}
    try:
        with served(tmp_path) as srv:
            out = finish(start(tmp_path, cxx_wrapper, bound, srv.url, *SMALL, "--steps", "2",
                               "--until-switched", KCACHE_TEST_CXX_GATE=str(gate), **env), tmp_path, bound)
    finally:
        gate.unlink()  # the stopped worker's host-compiler run, held at the gate, then ends
    k = out["kcache"]
    assert k["background_faults"] >= 1 and k["regions_switched"] == 0
    assert {j["state"] for j in out["timeline"]} == {"orphaned"}
    word = "KCACHE_WORKER_DEADLINE_S" if bound == "deadline" else "KCACHE_WORKER_MAX_RSS_MB"
    assert word in out["stderr"]
    assert_close_to_eager(out)


@pytest.mark.slow
def test_in_place_blocks_run_eagerly_and_a_main_class_compiles_on_the_training_thread(tmp_path, cxx_wrapper):
    """compile_regions_in_place (Accelerate's DeepSpeed and FSDP2 way) on a
    model whose repeated block is a class defined in __main__: that region
    is compiled on the training thread, as before (one trace, a refusal
    said with the reason); the model's other regions (Embedding, Linear:
    torch's classes) go to the worker, their blocks running their own
    _call_impl while eager, then switching. One job for both (the test
    command's time budget, bench/testtime/README.md)."""
    with served(tmp_path) as srv:
        out = finish(start(tmp_path, cxx_wrapper, "main", srv.url, "--main-blocks", "--in-place", "--layers", "2",
                           "--steps", "2", "--until-switched"), tmp_path, "main")
    k = out["kcache"]
    main = [j for j in out["timeline"] if j["region"] == "MainBlock"]
    assert k["background_refusals"] == 1 and [j["state"] for j in main] == ["wait path"]
    assert "defined in __main__" in main[0]["note"] and "defined in __main__" in out["stderr"]
    assert len(entry_traces(out)) == 1  # MainBlock's region traced here, as before
    others = [j for j in out["timeline"] if j["region"] != "MainBlock"]
    assert others and all(j["state"] == "switched" and j["by"] == "this rank's worker" for j in others)
    assert k["background_jobs"] == len(others) and k["regions_switched"] == len(others)
    assert 0 not in out["compiled_steps"] and k["eager_block_calls"] >= 2  # in place, eagerly first
    assert out["compiled_steps"] and k["background_faults"] == 0
    assert_close_to_eager(out)


# ---- the pieces ----

def test_try_get_or_compile_never_waits_and_counts_one_miss(tmp_path):
    from kcache import _core
    from kcache.artifacts import bundle_io

    with served(tmp_path) as srv:
        a = _core.Client(url=srv.url, local_dir="none")
        b = _core.Client(url=srv.url, local_dir="none")
        k1, k2 = "1" * 64, "2" * 64
        EXPL = json.dumps({"label": "a test region"})
        entered, release = threading.Event(), threading.Event()

        def slow_compile():
            entered.set()
            release.wait(60)
            return bundle_io.pack_precompiled(k1, EXPL, index={"constants": []})

        t = threading.Thread(target=lambda: a.get_or_compile(k1, slow_compile))
        t.start()
        assert entered.wait(60)
        assert b.try_get_or_compile(k1, lambda: pytest.fail("compiled a leased key")) is None
        assert b.try_get_or_compile(k1, lambda: pytest.fail("compiled a leased key")) is None
        data, source = b.try_get_or_compile(k2, lambda: bundle_io.pack_precompiled(k2, EXPL, index={}))
        assert source == "compiled"
        release.set()
        t.join(60)
        data, source = b.try_get_or_compile(k1, lambda: pytest.fail("compiled a stored key"))
        assert source == "server" and b.lookup(k1)[1] == "server"
        s = b.stats()
        assert s["lease_busy"] == 2 and s["misses"] == 2 and s["lease_waits"] == 0  # k1 once, k2 once


def test_the_workers_skeleton_keys_like_the_live_block():
    import copy

    from background_job import build_model
    from kcache.background import skeleton
    from kcache.keys import block_key
    from kcache.keys.fields import CompileSettings

    torch.manual_seed(0)
    for family in ("gpt2", "llama"):
        model = build_model(family, 2, 64)
        block = (model.transformer.h if family == "gpt2" else model.model.layers)[0]
        captured = {}

        def grab(mod, args, kwargs):
            captured["call"] = (args, kwargs)

        h = block.register_forward_pre_hook(grab, with_kwargs=True)
        model(torch.randint(0, 256, (2, 16)))
        h.remove()
        args, kwargs = captured["call"]
        settings = CompileSettings(backend="inductor", mode=None, fullgraph=False, dynamic=None, options={})
        live = block_key.region_fields(block, args, kwargs, settings, entry="call", entry_source="x")
        rebuilt, rargs, rkwargs, context = skeleton.rebuild(skeleton.describe(block, args, kwargs))
        with skeleton.applied(context):
            copy_fields = block_key.region_fields(rebuilt, rargs, rkwargs, settings, entry="call",
                                                  entry_source="x")
        assert copy_fields == live, family
        assert all(p.device.type == "cpu" for p in rebuilt.parameters())
        assert copy.deepcopy(block) is not None  # the live block is untouched


def test_a_block_the_worker_cannot_rebuild_is_refused_with_the_reason():
    from kcache.background import skeleton

    Local = type("Local", (torch.nn.Linear,), {"__module__": "__main__"})
    with pytest.raises(skeleton.NotReproducible, match="defined in __main__"):
        skeleton.describe(Local(4, 4), (torch.randn(2, 4),), {})
    with pytest.raises(skeleton.NotReproducible, match="does not copy"):
        skeleton.describe(torch.nn.Linear(4, 4), (torch.randn(2, 4),), {"lock": threading.Lock()})
    block = torch.nn.Linear(4, 4)
    block.helper = _local_class()(2.0)  # a class no module-level name holds
    with pytest.raises(skeleton.NotReproducible, match="does not copy"):
        skeleton.describe(block, (torch.randn(2, 4),), {})


def _local_class():
    class Scale:  # defined in a function's scope, as the `kernels` package makes its layers
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    return Scale


LocalScale = _local_class()  # ...and bound to a module-level name


def test_closures_and_local_classes_reach_the_worker_by_code_and_by_name():
    """A block holding a lambda over a local, a closure and an instance of
    a class defined inside a function (bound at module level): the worker's
    copy has working equivalents (kcache/background/functions.py)."""
    from kcache.background import skeleton

    k = 3.0
    block = torch.nn.Linear(4, 4)
    block.act = lambda x: x * k
    block.helper = LocalScale(2.0)
    block.register_forward_hook(lambda mod, i, o: o + k)
    scope: dict = {}
    exec("f = lambda x: x * 5.0", scope)  # noqa: S102 - a function with no module (__module__ is None)
    block.execd = scope["f"]
    rebuilt, args, _, _ = skeleton.rebuild(skeleton.describe(block, (torch.randn(2, 4),), {}))
    x = torch.randn(3)
    assert rebuilt.act is not block.act and torch.equal(rebuilt.act(x), x * 3.0)
    assert type(rebuilt.helper) is LocalScale and torch.equal(rebuilt.helper(x), x * 2.0)
    assert torch.equal(rebuilt.execd(x), x * 5.0)
    with torch.no_grad():
        rebuilt.weight.copy_(block.weight)
        rebuilt.bias.copy_(block.bias)
    assert torch.equal(rebuilt(args[0]), block(args[0]))  # the hook came along


def _doubled_forward(self, x):
    return torch.nn.functional.linear(x, self.weight, self.bias) * 2.0


def test_an_instance_forward_travels_as_it_is_and_is_in_the_key():
    """`block.forward = MethodType(f, block)`: the worker's copy runs f, not
    the class's forward (pickled in place, the bound method came back as
    the class's), and the key says the block runs other code than a plain
    one of its class (a worker's region of the class's code occupied the
    block's key before)."""
    import types

    from kcache.background import skeleton
    from kcache.keys import block_key
    from kcache.keys.fields import CompileSettings

    torch.manual_seed(0)
    plain, own = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    own.load_state_dict(plain.state_dict())
    own.forward = types.MethodType(_doubled_forward, own)
    x = torch.randn(2, 4)
    settings = CompileSettings()
    keys = [block_key.region_fields(b, (x,), {}, settings, entry="call", entry_source="x")["region"]
            for b in (plain, own)]
    assert keys[0] != keys[1]
    rebuilt, args, _, context = skeleton.rebuild(skeleton.describe(own, (x,), {}))
    with torch.no_grad():
        rebuilt.load_state_dict(own.state_dict())
    assert torch.equal(rebuilt(x), own(x)) and torch.equal(own(x), plain(x) * 2.0)
    with skeleton.applied(context):
        assert block_key.region_fields(rebuilt, args, {}, settings, entry="call",
                                       entry_source="x")["region"] == keys[1]


def test_the_default_mode_is_background_only_with_a_server(monkeypatch, tmp_path):
    from kcache import _core, background
    from kcache.state import store

    monkeypatch.setattr(store, "_store", store._store)  # restored after the test
    monkeypatch.setattr(store, "_environ", store._environ)
    cases = [({"KCACHE_URL": "http://127.0.0.1:1"}, "background"),
             ({}, "wait"),
             ({"KCACHE_URL": "http://127.0.0.1:1", "KCACHE_COLD_START": "wait"}, "wait"),
             ({"KCACHE_COLD_START": "background"}, "background"),  # the node tier carries it
             ({"KCACHE_COLD_START": "background", "KCACHE_LOCAL_DIR": "none"}, "wait"),
             ({"KCACHE_URL": "http://127.0.0.1:1", "KCACHE_COLD_START": "sometimes"}, "wait")]
    for env, expected in cases:
        for name in ("KCACHE_URL", "KCACHE_COLD_START", "KCACHE_LOCAL_DIR"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("KCACHE_LOCAL_DIR", str(tmp_path / "node"))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        store.configure()
        assert background.mode(store.get_store()) == expected, env
    store.configure(url="http://127.0.0.1:1", local_dir=str(tmp_path / "node"), retries=0)
    assert background.mode(store.get_store()) == "wait"  # options in code: a worker cannot repeat them
    assert isinstance(store.get_store(), _core.Client)


def test_a_malformed_worker_bound_keeps_its_default(monkeypatch, caplog):
    from kcache import settings

    monkeypatch.setenv("KCACHE_WORKER_DEADLINE_S", "soon")
    monkeypatch.setenv("KCACHE_WORKER_MAX_RSS_MB", "-5")
    assert settings.number("KCACHE_WORKER_DEADLINE_S") == 1800
    assert settings.number("KCACHE_WORKER_MAX_RSS_MB") == 16384
    monkeypatch.setenv("KCACHE_WORKER_DEADLINE_S", " 30 ")
    assert settings.number("KCACHE_WORKER_DEADLINE_S") == 30
    assert "KCACHE_WORKER_DEADLINE_S must be a positive whole number, not 'soon'" in caplog.text


def test_an_orphaned_region_switches_when_another_process_stores_it(monkeypatch, tmp_path):
    """After a worker fault the region stays eager, and the rank looks for it
    in the store now and then: stored by another process, it switches."""
    from kcache import _core
    from kcache.artifacts import bundle_io
    from kcache.background import NotReady, coordinator

    monkeypatch.setattr(coordinator, "ORPHAN_LOOK_S", 0.0)
    client = _core.Client(url=None, local_dir=str(tmp_path / "node"))
    bg = coordinator.Background(client)
    key = "3" * 64
    bg.jobs[key] = coordinator.Job(key, "Block", b"", 0.0)
    bg.pending.add(key)
    bg._orphan([key], "the compile worker exited (code -9)")
    assert not bg.ready(key, False) and bg.timeline()[0]["state"] == "orphaned"
    with pytest.raises(NotReady):
        bg.store.get_or_compile(key, lambda: pytest.fail("compiled on the training thread"))
    assert client.put(key, bundle_io.pack_precompiled(key, json.dumps({"label": "Block"}), index={}))
    assert bg.ready(key, True) is False  # not inside autograd's backward
    assert bg.ready(key, False) is True
    state = bg.timeline()[0]
    assert state["state"] == "switched" and state["by"] == "another process" and state["eager_calls"] == 2
    data, source = bg.store.get_or_compile(key, lambda: pytest.fail("compiled on the training thread"))
    assert source == "node"


@pytest.mark.slow
def test_a_job_that_turns_to_eval_while_eager_ends_compiled_and_stops_compiling(tmp_path, cxx_wrapper):
    """The training region lands after the job turned to eval, and no block
    calls it again: compiling() says False once a step runs with no eager
    call, so a job that runs "until compiled" ends, on the eval region."""
    with served(tmp_path) as srv:
        out = finish(start(tmp_path, cxx_wrapper, "eval", srv.url, "--model", "gpt2", "--layers", "2",
                           "--hidden", "32", "--steps", "2", "--eval-from", "1", "--until-switched",
                           "--max-steps", "50000"), tmp_path, "eval")
    k = out["kcache"]
    assert k["background_jobs"] >= 2  # the training region and the eval region
    assert k["background_faults"] == 0 and k["background_refusals"] == 0
    steps, compiled = len(out["losses"]), out["compiled_steps"]
    assert compiled and compiled[-1] == steps - 1 and 0 not in compiled  # eager first, compiled last
    # It stopped within a step or two of its last eager call, not at --max-steps.
    trailing = 0  # the steps at the end that ran every block compiled
    while trailing < len(compiled) and compiled[-1 - trailing] == steps - 1 - trailing:
        trailing += 1
    assert trailing <= 3 and steps < 50000, (trailing, steps)
    assert_close_to_eager(out)


@pytest.mark.slow
def test_a_block_frozen_after_its_first_call_ends_on_its_frozen_variant(tmp_path, cxx_wrapper):
    """requires_grad turned off on one block after the blocks switched: no
    watch sees it, PyTorch's guard does; the block is keyed again onto the
    frozen variant (sent to the worker, eager meanwhile) and ends compiled,
    not on the traced path for good."""
    with served(tmp_path) as srv:
        out = finish(start(tmp_path, cxx_wrapper, "freeze", srv.url, "--model", "gpt2", "--layers", "2",
                           "--hidden", "32", "--steps", "2", "--until-switched", "--freeze-when-compiled",
                           "--max-steps", "50000"), tmp_path, "freeze")
        restart = finish(start(tmp_path, cxx_wrapper, "again", srv.url, "--model", "gpt2", "--layers", "2",
                               "--hidden", "32", "--steps", "4", "--freeze-when-compiled"), tmp_path, "again")
    k = out["kcache"]
    steps, compiled = len(out["losses"]), out["compiled_steps"]
    assert k["precompiled_guard_failures"] >= 1 and k["precompiled_rekeys"] >= 1, k
    assert k["background_jobs"] >= 2 and k["background_refusals"] == 0 and k["background_faults"] == 0
    assert compiled and compiled[-1] == steps - 1 and steps < 50000
    assert out["dynamo_traced"] == []  # never the traced path in this process
    assert_close_to_eager(out)
    r = restart["kcache"]  # both variants stored: the restart switches at the freeze without compiling
    assert restart["compiled_steps"] == [0, 1, 2, 3] and r["misses"] == 0 and r["background_jobs"] == 0
    assert r["precompiled_rekeys"] >= 1 and restart["dynamo_traced"] == []
    assert_close_to_eager(restart)
