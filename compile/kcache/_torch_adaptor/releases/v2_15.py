"""torch 2.15: what differs from 2.13 for kcache (docs/torch-support.md).

Guards:
- 2.14's COW_TENSOR_MATCH is still built, with the same meaning.
- LIST_REVERSEITERATOR_LEN is new: the remaining length of a live
  reversed(list) iterator, built where a region is handed one. Like
  RANGE_ITERATOR_MATCH it describes a partly consumed iterator, which has no
  portable meaning in another process: a trace check.
- CURRENT_STREAM_MATCH is new: whether a torch.Stream the region reads is the
  device's current stream, a property of the live process's stream state. Its
  lambda guard is not one PyTorch re-evaluates from serialized metadata in
  every build kcache has checked, so kcache does not call it "pytorch":
  a trace check (a trace per variant and process, never a false hit).
"""

RELEASE = "2.15"
GUARD_ROWS: dict[str, str] = {
    "COW_TENSOR_MATCH": "pytorch",
    "LIST_REVERSEITERATOR_LEN": "trace",
    "CURRENT_STREAM_MATCH": "trace",
}
