"""torch 2.13: the release the adaptor was written against; everything the
other modules add or take away is relative to it."""

RELEASE = "2.13"
# Guard types this release builds beyond the base table (guard_checks.py).
GUARD_ROWS: dict[str, str] = {}


def guards_state_unpickling():
    """A context in which Dynamo's guard state unpickles a guarded tensor
    whose .grad was set when it was compiled.

    2.13 and 2.14 pickle such a tensor's grad even where the grad is not in
    the guard tree, as a `_Missing` placeholder, and unpickling assigns the
    placeholder to `.grad`: TypeError ("assigned grad expected to be a Tensor
    or None"), so a variant compiled after a backward (eval after training)
    could not be loaded and its blocks took the traced path. 2.15 assigns
    None for anything that is not a tensor (torch/_dynamo/guards.py,
    GuardsStatePickler._unpickle_tensor); this does the same while a region
    loads. No guard reads such a grad: one that did would have put it in
    the guard tree, and it would unpickle as a tensor."""
    import contextlib

    import torch
    from torch._dynamo.guards import GuardsStatePickler

    @contextlib.contextmanager
    def context():
        original = GuardsStatePickler.__dict__["_unpickle_tensor"]
        func = original.__func__

        def tolerant(cls, meta_tensor, device, pytype, dispatch_keys_raw, grad):
            return func(cls, meta_tensor, device, pytype, dispatch_keys_raw,
                        grad if isinstance(grad, torch.Tensor) else None)

        GuardsStatePickler._unpickle_tensor = classmethod(tolerant)
        try:
            yield
        finally:
            GuardsStatePickler._unpickle_tensor = original

    return context()
