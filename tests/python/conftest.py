"""The order of the whole Python suite. Its folders: compile/ (the
torch.compile integration, real torch.compile; its fixtures in
compile/conftest.py), server/, cli/, client/ (the real kcache-server), and
harness/ (what they share). This directory is on sys.path for all of them,
so `import harness` works everywhere."""

import os
import pathlib

# The suite's jobs take the cold start's wait path (docs/cold-start.md):
# their proofs count compiles and Dynamo traces in the job's own process,
# and with a server the default would hand those to a compile worker.
# tests/python/compile/test_cold_background.py runs the default on purpose.
os.environ.setdefault("KCACHE_COLD_START", "wait")


def pytest_collection_modifyitems(config, items):
    """Longest first: modules with slow tests (real torch.compile of a
    model; those with more slow tests first), then the other torch modules
    (compile/), then the server, CLI and client tests, each module kept whole and
    in its own order. The test command hands pytest-xdist's workers whole
    modules (--dist loadscope), so starting the long ones first keeps one
    worker from being left with a long module at the end while the others
    idle."""
    here = pathlib.Path(__file__).parent / "compile"

    slow: dict[pathlib.Path, int] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            path = pathlib.Path(str(item.path))
            slow[path] = slow.get(path, 0) + 1

    def rank(item) -> tuple[int, int, str]:
        path = pathlib.Path(str(item.path))
        if path in slow:
            return 0, -slow[path], str(path)
        return (1 if path.parent == here else 2), 0, ""

    items.sort(key=rank)  # stable: each module's tests stay together, in order
