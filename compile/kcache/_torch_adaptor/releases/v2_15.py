"""torch 2.15: what differs from 2.13 for kcache (docs/torch-support.md).

Guards: 2.14's COW_TENSOR_MATCH is still built, with the same meaning.
"""

RELEASE = "2.15"
GUARD_ROWS: dict[str, str] = {"COW_TENSOR_MATCH": "pytorch"}
