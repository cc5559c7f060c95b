"""Where a cold start's compile runs (kcache/background/placement.py): the
decision over generated hosts and settings, the CPU-list parser over
generated lists, what the process reads of itself, and the worker placed
for real (its affinity and scheduling policy read back from the kernel).
A job that takes the decision end to end is in test_cold_background.py."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from kcache.background import placement as placing


def random_host(rng: random.Random) -> placing.Host:
    online = rng.randint(1, 64)
    pinned = rng.random() < 0.5
    affinity = (frozenset(rng.sample(range(online), rng.randint(1, online))) if pinned
                else frozenset(range(online)))
    return placing.Host(affinity, online, rng.randint(1, 2 * online), rng.randint(1, 8))


def free_for_worker(host: placing.Host) -> int:
    """Cores of the process's affinity the training's threads leave free,
    counted independently of Host.spare_cores: threads on the node (all its
    ranks' when the process may run everywhere) against the cores."""
    training = host.threads * (host.local_ranks if host.affinity == frozenset(range(host.online)) else 1)
    return len(host.affinity) - training


def test_generated_hosts_get_a_worker_exactly_when_it_has_cores_of_its_own():
    rng = random.Random(69)
    seen = {"gpu": 0, "named": 0, "spare": 0, "shared": 0, "asked": 0}
    for _ in range(5000):
        host = random_host(rng)
        device = rng.choice(["cpu", "cpu", "cuda", "xpu"])
        asked = rng.choice(["", "", "", "wait", "background"])
        others = sorted(set(range(host.online)) - host.affinity)  # cores the process may not run on
        cpus = rng.choice([None, frozenset(rng.sample(range(host.online), rng.randint(1, host.online))),
                           frozenset(rng.sample(others, rng.randint(1, len(others)))) if others else None])
        priority = rng.choice(placing.PRIORITIES)
        p = placing.decide(device, asked, host, cpus, priority)
        assert p.mode in ("background", "wait") and p.reason
        if asked:
            seen["asked"] += 1
            assert p.mode == asked, (asked, p)
        elif device != "cpu":
            seen["gpu"] += 1
            assert p.mode == "background" and device in p.reason
        elif cpus is not None and not cpus & host.affinity:
            seen["named"] += 1
            assert p.mode == "background" and "KCACHE_WORKER_CPUS" in p.reason
        elif free_for_worker(host) >= 1:
            seen["spare"] += 1
            assert p.mode == "background" and "left free" in p.reason
        else:
            seen["shared"] += 1
            # the measured choice (bench/coldstart/REPORT_placement.md), and how to override it
            assert p.mode == placing.SHARED_CORES_MODE == "wait", (host, p)
            assert "KCACHE_COLD_START=background" in p.reason and "KCACHE_WORKER_CPUS" in p.reason
        if p.mode == "background":  # the job's worker settings reach the worker as given
            assert (p.worker_cpus, p.priority) == (cpus, priority)
        else:
            assert p.worker_cpus is None
    assert all(count > 100 for count in seen.values()), seen  # every branch generated


def render(cpus: set[int], rng: random.Random) -> str:
    """A CPU list as taskset writes it: ranges of consecutive CPUs, in a
    random order and spacing."""
    runs, ordered = [], sorted(cpus)
    start = prev = ordered[0]
    for c in ordered[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        runs.append(f"{start}-{prev}" if prev > start or rng.random() < 0.2 else str(start))
        if c is not None:
            start = prev = c
    rng.shuffle(runs)
    return rng.choice([",", ", "]).join(runs)


def test_generated_cpu_lists_parse_back_and_malformed_ones_are_refused():
    rng = random.Random(17)
    for _ in range(2000):
        cpus = set(rng.sample(range(256), rng.randint(1, 40)))
        text = render(cpus, rng)
        assert placing.parse_cpus(text) == cpus, text
    assert placing.parse_cpus("") is None and placing.parse_cpus("  ") is None
    for bad in ("x", "1-", "-1", "3-1", "1,,2", "1.5", "0x1", "1;2", "0-99999999999"):
        with pytest.raises(placing.PlacementError, match="KCACHE_WORKER_CPUS"):
            placing.parse_cpus(bad)
    assert placing.parse_priority("") == "normal" and placing.parse_priority(" IDLE ") == "idle"
    with pytest.raises(placing.PlacementError, match="KCACHE_WORKER_PRIORITY"):
        placing.parse_priority("low")


def test_the_host_is_read_from_the_process(monkeypatch):
    import torch

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    host = placing.Host.here()
    assert host.affinity == frozenset(os.sched_getaffinity(0)) and host.online == os.cpu_count()
    assert host.threads == torch.get_num_threads() and host.local_ranks == 3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "many")
    assert placing.Host.here().local_ranks == 1


def test_a_worker_is_pinned_and_deprioritized_for_real():
    """placement.apply on a just-started process: the kernel's view of its
    affinity and policy, inherited by a thread and a child it starts later
    (the compile worker's threads and its host-compiler runs)."""
    cpu = max(os.sched_getaffinity(0))
    code = ("import os, threading, subprocess, sys; sys.stdin.readline(); out = []\n"
            "t = threading.Thread(target=lambda: out.append((sorted(os.sched_getaffinity(0)), "
            "os.sched_getscheduler(0)))); t.start(); t.join()\n"
            "child = subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)), "
            "os.sched_getscheduler(0))'], capture_output=True, text=True).stdout.strip()\n"
            "print(out[0], child)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    placing.apply(proc.pid, placing.Placement("background", "test", frozenset({cpu}), "idle"))
    out, _ = proc.communicate("go\n", timeout=60)
    assert out.strip() == f"([{cpu}], {os.SCHED_IDLE}) [{cpu}] {os.SCHED_IDLE}", out


def test_malformed_worker_settings_are_said_once_and_left_at_their_defaults(monkeypatch, caplog):
    """A typo in KCACHE_WORKER_CPUS or KCACHE_WORKER_PRIORITY never stops a
    job: the rank says it once and the worker runs unpinned at normal
    priority (the decision is made as without the setting)."""
    from kcache.background import coordinator

    monkeypatch.setenv("KCACHE_COLD_START", "background")
    monkeypatch.setenv("KCACHE_WORKER_CPUS", "0-x")
    monkeypatch.setenv("KCACHE_WORKER_PRIORITY", "lowest")
    monkeypatch.setattr(coordinator, "_said_mode", set())
    with caplog.at_level("WARNING", logger="kcache"):
        first = coordinator._placement("cpu")
        again = coordinator._placement("cpu")
    assert first == again and first.mode == "background"
    assert first.worker_cpus is None and first.priority == "normal"
    said = [r.getMessage() for r in caplog.records]
    assert sum("KCACHE_WORKER_CPUS must be a CPU list" in m for m in said) == 1, said
    assert sum("KCACHE_WORKER_PRIORITY must be normal or idle" in m for m in said) == 1, said
