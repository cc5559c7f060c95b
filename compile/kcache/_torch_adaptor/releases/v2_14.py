"""torch 2.14: what differs from 2.13 for kcache (docs/torch-2.14-survey.md).

- GuardBuilder.COW_TENSOR_MATCH is new. Dynamo builds it only where the
  region's code asks torch._C._is_cow_tensor(t); the guard serializes its
  expected bool (register_guard_check_spec) and PyTorch evaluates it on the
  live tensor in the loading process, argument or global alike: PyTorch's
  own check, like GRAD_MODE.
- A guarded tensor's grad still unpickles as a placeholder (2.13's
  guards_state_unpickling applies).
"""

from . import v2_13

RELEASE = "2.14"
GUARD_ROWS: dict[str, str] = {"COW_TENSOR_MATCH": "pytorch"}
guards_state_unpickling = v2_13.guards_state_unpickling  # the same fault as 2.13 (2.15 fixed it)
