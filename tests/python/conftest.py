"""pytest fixtures for tests/python; shared helpers live in kc_testing.py
(test files import from there: a module named `conftest` is ambiguous when
several directories have one)."""

from kc_testing import cxx_wrapper  # noqa: F401
