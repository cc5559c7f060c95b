"""The one test harness of kcache's Python tests and bench scripts.

harness.server   the real kcache-server on a random loopback port; every
                 folder's launcher builds on it (server/server_harness.py,
                 cli/cli_harness.py, client/client_harness.py,
                 compile/kc_testing.py)
harness.bundles  bundles for a key, from the real bundle writer
harness.resp     a plain RESP2 connection (redis-py is used too, as a
                 real client)
harness.pki      test certificates made by the openssl CLI
harness.redis    a real redis-server on a random loopback port
harness.jobs     a job run to its end, or past its limit stopped with
                 every Python thread's stack in the failure
harness.redis_cluster  a real Redis Cluster (server/cluster_harness.py
                 re-exports it for the server tests and bench/storage)
"""
