"""pytest fixtures for tests/python; shared helpers live in kc_testing.py
(test files import from there: a module named `conftest` is ambiguous when
several directories have one)."""

import pathlib

import pytest

import kc_testing
from kc_testing import cxx_wrapper  # noqa: F401
from traced_job import traced_cold  # noqa: F401


@pytest.fixture(scope="session", autouse=True)
def host_facts(tmp_path_factory, worker_id):
    """The session's host facts and CXX wrapper (kc_testing.HOST_FACTS), in
    a directory all of pytest-xdist's workers share."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    kc_testing.HOST_FACTS["dir"] = kc_testing.find_host_facts(shared)
    kc_testing.HOST_FACTS["wrapper"] = kc_testing.session_cxx_wrapper(shared)


@pytest.fixture(autouse=True)
def fresh_node_marker(request):
    """A test marked fresh_node starts every node directory empty (it proves
    what a new node or container does: build, check and share Inductor's
    ISA probes, find -march=native); the others start with the session's
    host facts."""
    kc_testing.HOST_FACTS["seed"] = request.node.get_closest_marker("fresh_node") is None
    yield
    kc_testing.HOST_FACTS["seed"] = True


def pytest_collection_modifyitems(config, items):
    """Longest first: modules with slow tests (real torch.compile of a
    model; those with more slow tests first), then the other torch modules
    here, then the server, CLI and client tests, each module kept whole and
    in its own order. The test command hands pytest-xdist's workers whole
    modules (--dist loadscope), so starting the long ones first keeps one
    worker from being left with a long module at the end while the others
    idle."""
    here = pathlib.Path(__file__).parent

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
