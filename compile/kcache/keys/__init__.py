"""Keys: the fields that decide what PyTorch compiles, turned into a key.

fields (dtype, target, mode, toolchain, env), graph_key (a Dynamo graph's key:
the traced path), block_key (a block's key found without tracing: the
precompiled path), make (the one function that hashes fields into a key).
"""
