"""torch 2.13: the release the adaptor was written against; everything the
other modules add or take away is relative to it."""

RELEASE = "2.13"
# Guard types this release builds beyond the base table (guard_checks.py).
GUARD_ROWS: dict[str, str] = {}
