import copy, pickle, io, torch, time
blk = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
blk.register_forward_hook(lambda m, i, o: None)
try: pickle.dumps(blk); print("pickle with lambda hook: ok")
except Exception as e: print("pickle with lambda hook fails:", type(e).__name__, str(e)[:80])
skel = copy.deepcopy(blk).to("meta"); skel._forward_hooks.clear()
data = pickle.dumps(skel); print("meta skeleton bytes:", len(data), "vs real weights bytes:", len(pickle.dumps(copy.deepcopy(blk).to('cpu').__dict__['_parameters'] or {}) ) if False else sum(p.numel()*p.element_size() for p in blk.parameters()))
w = pickle.loads(data).to_empty(device="cpu")
print("requires_grad kept:", all(p.requires_grad for p in w.parameters()), "training:", w.training)
