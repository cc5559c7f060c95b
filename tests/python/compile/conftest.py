"""Fixtures of the compile-package tests; shared helpers live in
kc_testing.py (test files import from there: a module named `conftest` is
ambiguous when several directories have one)."""

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
