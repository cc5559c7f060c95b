"""The Redis Cluster launcher, as the server tests and bench/storage import
it: harness/redis_cluster.py."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/python: the harness package

from harness.redis_cluster import *  # noqa: E402,F401,F403
