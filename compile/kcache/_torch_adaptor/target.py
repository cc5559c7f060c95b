"""The CPU target: Inductor's vector ISA, its per-ISA build checks and
probe binaries, the host compiler."""

from __future__ import annotations

import contextlib
import hashlib

from .inductor import inductor_cache_dir


def cpu_vec_isa() -> str:
    """The vector ISA Inductor generates CPU code for here ("avx512", "avx2", …)."""
    from torch._inductor import cpu_vec_isa as isa

    picked = isa.pick_vec_isa()
    return str(picked) if picked else "novec"


def isa_checks_done() -> bool:
    """Whether Inductor already decided its valid vector ISAs in this process."""
    from torch._inductor import cpu_vec_isa as isa

    return isa.valid_vec_isa_list.cache_info().currsize > 0


@contextlib.contextmanager
def isa_checks(known: dict[str, bool]):
    """Inductor's per-ISA checks (VecISA.check_build: build a probe library
    with the ISA's flags, dlopen it in a child Python) answered from
    `known` where it holds the answer for that ISA class, flags and probe
    source, and run for real otherwise. Yields a dict of every answer given
    inside, for the node to remember. Inductor caches each ISA's verdict
    for the process, so answering once is enough.
    """
    from torch._inductor import cpu_vec_isa as isa

    real = isa.VecISA.check_build
    answers: dict[str, bool] = {}

    def check_build(self, code: str) -> bool:
        name = "|".join((type(self).__name__, self.build_arch_flags(),
                         hashlib.sha256(code.encode()).hexdigest()[:16]))
        if name not in answers:
            answers[name] = known[name] if isinstance(known.get(name), bool) \
                else bool(real(self, code))
        return answers[name]

    isa.VecISA.check_build = check_build
    try:
        yield answers
    finally:
        isa.VecISA.check_build = real


def isa_probe_binaries() -> dict[str, bytes]:
    """The ISA probe libraries Inductor built in its cache directory.

    pick_vec_isa() compiles a tiny *_chk_kernel program per candidate ISA
    (about 10 s on 2 cores) once per Inductor cache directory, then runs
    each to check this CPU. The binaries depend only on the compiler and
    its flags, so kcache ships them: a fresh node then only runs the checks.
    """
    root = inductor_cache_dir()
    found: dict[str, bytes] = {}
    for so in root.glob("*/*.so"):
        src = so.with_suffix(".cpp")
        try:
            if "_chk_kernel" in src.read_text(errors="replace"):
                found[str(so.relative_to(root))] = so.read_bytes()
        except OSError:
            continue
    return found


def host_compiler() -> str:
    """Inductor's C++ compiler command (it honours CXX)."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    return get_cpp_compiler()
