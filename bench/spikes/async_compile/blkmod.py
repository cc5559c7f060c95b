import torch
def call(block, x): return block(x)
