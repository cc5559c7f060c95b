"""The one test harness of kcache's Python tests and bench scripts.

harness.server  the real kcache-server on a random loopback port (every
                test folder's launcher builds on it: server/server_harness.py,
                cli/cli_harness.py, client/client_harness.py, kc_testing.py)

Redis and Redis Cluster launchers stay in server/server_harness.py and
server/cluster_harness.py, which bench/ imports too.
"""
