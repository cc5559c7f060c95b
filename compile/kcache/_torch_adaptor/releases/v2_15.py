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


def portable_config(cfg):
    """cfg.save_config_portable(), without the 1.1 s import it costs here.

    2.15's Inductor config serializes `inductor_choices_class` through
    torch._inductor.config._serialize_inductor_choices, which imports
    torch._inductor.choices and with it the whole lowering stack (lowering,
    ir, scheduler, select_algorithm): a warm process that compiles nothing
    would import the compiler just to compute a key. While that module is
    not imported nothing can be registered with it, so an unset
    inductor_choices_class serializes as None, what the serializer answers
    then; any other case goes to PyTorch's serializer.
    tests/python/compile/test_torch_adaptor.py checks both give the same dict.
    """
    import sys

    import torch

    # The config module refuses setattr of a non-config name: its __dict__.
    original = cfg.__dict__.get("_cache_config_serializer")
    if (cfg is not torch._inductor.config or original is None
            or "torch._inductor.choices" in sys.modules):
        return cfg.save_config_portable()

    def lazy(config):
        if config.get("inductor_choices_class") is not None:
            original(config)

    cfg.__dict__["_cache_config_serializer"] = lazy
    try:
        return cfg.save_config_portable()
    finally:
        cfg.__dict__["_cache_config_serializer"] = original
