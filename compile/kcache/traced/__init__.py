"""The traced path: Dynamo traces each block, kcache supplies what Inductor
compiles (RegionBackend)."""
