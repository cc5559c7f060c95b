"""Cold start without waiting (docs/cold-start.md): a block whose region is
not stored yet runs eagerly while a compile worker process builds the
region, and switches to it when it lands.

Read in this order:
- nowait.py: the store a region builds through in this mode: a stored key
  is fetched, a missing one raises NotReady instead of compiling here;
- skeleton.py: what the worker is sent (a weightless copy of the block,
  its call's tensors as specs, grad mode, autocast and compile settings),
  with functions.py (functions by name or by code), class_state.py (the
  block's classes as the rank has them) and global_state.py (the module
  globals its code reads, as the rank has them);
- wire.py: the framed messages between the rank and its worker;
- placement.py: whether a compile runs in a worker or in the first call
  (the blocks' device, the cores the training leaves free), and the
  worker's cores and priority;
- worker_process.py: the worker seen from the rank (spawn, send, poll,
  memory bound, deadline, death);
- coordinator.py: the rank's view of every region in hand (pending,
  landed, settled) and the switch.

The worker's own loop is kcache/tools/compile_worker.py (it runs the
precompiled path, which sits above this package).
"""

from .coordinator import Background, compiling, current, for_store, force, mode
from .nowait import Busy, NotReady

__all__ = ["Background", "Busy", "NotReady", "compiling", "current", "for_store", "force", "mode"]
