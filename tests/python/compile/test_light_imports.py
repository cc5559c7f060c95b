"""The adaptor's stand-ins for Inductor's compiler modules
(kcache/_torch_adaptor_imports.py), checked against the real modules of the
pinned torch: each stand-in holds the very objects the real module holds,
the generated code's header still imports what the stand-ins provide, a
load through them imports no compiler module, and anything else they are
asked for is answered by the real module. Each check runs in a fresh
process, since this one may have imported Inductor already.
(The end-to-end proof on a real warm start is in test_precompiled_warm.py.)"""

from __future__ import annotations

import json
import textwrap


from kc_testing import PYTHON, python_env
from harness.jobs import run_job

# What Inductor's generated Python module imports from the compiler
# (torch/_inductor/codegen/wrapper.py, torch 2.13).
HEADER = textwrap.dedent("""\
    import torch
    from torch._inductor.hooks import run_intermediate_hooks
    from torch._inductor.utils import maybe_profile
    from torch._inductor.codegen.memory_planning import _align as align
    from torch import device, empty_strided
    from torch._inductor.async_compile import AsyncCompile
    from torch._inductor.select_algorithm import extern_kernels
    """)


def run(code: str) -> dict:
    out = run_job([PYTHON, "-c", textwrap.dedent(code)], timeout=300, env=python_env())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_stand_ins_hold_the_objects_the_real_modules_hold():
    r = run("""
        import inspect, json
        import torch
        from torch._inductor import codecache, debug, output_code, utils, wrapper_benchmark
        from torch._inductor.codegen import memory_planning, wrapper
        from torch._inductor.graph import GraphLowering
        from torch._inductor.select_algorithm import extern_kernels
        from kcache import _torch_adaptor_imports as L

        table = L.extern_kernel_table()
        same = {n: L._resolve(loc) is getattr(extern_kernels, n) for n, loc in table.items()}
        header = inspect.getsource(wrapper.PythonWrapperCodegen.write_header)
        print(json.dumps({
            "table": table, "same": same,
            "unlocated": sorted(set(vars(extern_kernels)) - set(table)),
            "align": memory_planning._align is utils._align,
            "save_output_code": GraphLowering.save_output_code,
            "debug": {k: getattr(debug, k) for k in L.DEBUG_DEFAULTS},
            "header": header,
            "hit_path": inspect.getsource(codecache.FxGraphCache.cache_hit_post_compile),
            "call_path": inspect.getsource(output_code.CompiledFxGraph.__call__),
        }))
        """)
    assert r["table"]["mm"] == "torch:mm" and r["table"]["addmm"] == "torch:addmm"
    assert any(loc.startswith("ops:") for loc in r["table"].values())
    assert all(r["same"].values()) and len(r["same"]) >= 15, r["same"]
    # Python functions in Inductor's kernel modules are not in the table:
    # a stand-in asks the real module for those.
    assert "bias_addmm" in r["unlocated"]
    assert r["align"] is True
    assert r["save_output_code"] is None
    assert r["debug"] == {"RECORD_GRAPH_EXECUTION": False, "GRAPH_EXECUTION_ORDER": None,
                          "GRAPH_COMPILE_IDS": None}
    for line in HEADER.splitlines():
        if "memory_planning" in line or "select_algorithm" in line:
            assert line in r["header"], line
    assert "from .graph import GraphLowering" in r["hit_path"]
    assert "GraphLowering.save_output_code" in r["hit_path"]
    assert "torch._inductor.debug.RECORD_GRAPH_EXECUTION" in r["call_path"]


def test_a_load_imports_no_compiler_module_and_the_real_one_answers_the_rest():
    table = run("""
        import json
        from torch._inductor.select_algorithm import extern_kernels  # noqa: F401
        from kcache import _torch_adaptor_imports as L
        print(json.dumps(L.extern_kernel_table()))
        """)
    r = run(f"""
        import json, sys
        import torch
        from kcache import _torch_adaptor_imports as L

        header = {HEADER!r}
        a, b = torch.randn(3, 4), torch.randn(4, 5)
        with L.light_imports({table!r}):
            gen = {{}}
            exec(compile(header, "generated.py", "exec"), gen)
            out = gen["extern_kernels"].mm(a, b)
            loaded = L.compiler_modules_imported()
            debug_flag = torch._inductor.debug.RECORD_GRAPH_EXECUTION
            from torch._inductor.graph import GraphLowering
            hook = GraphLowering.save_output_code
            # Not in the table: the real select_algorithm answers.
            bias_addmm = gen["extern_kernels"].bias_addmm
            real = sys.modules["torch._inductor.select_algorithm"]
        after = [m for m, mod in list(sys.modules.items()) if L.is_stand_in(mod)]
        import torch._inductor.select_algorithm as sa
        from torch._inductor.kernel.mm import bias_addmm as real_bias_addmm
        print(json.dumps({{
            "mm_ok": bool(torch.equal(out, a @ b)), "loaded": loaded,
            "debug_flag": debug_flag, "hook": hook,
            "bias_addmm_real": bias_addmm is real_bias_addmm,
            "real_is_real": not L.is_stand_in(real) and real is sa,
            "stand_ins_left": after, "stats": L.stats(),
            "mm_is_torch_mm": gen["extern_kernels"].mm is torch.mm,
        }}))
        """)
    assert r["mm_ok"] and r["mm_is_torch_mm"]
    assert r["loaded"] == [], r["loaded"]
    assert r["debug_flag"] is False and r["hook"] is None
    assert r["bias_addmm_real"] and r["real_is_real"]
    assert r["stand_ins_left"] == []
    assert r["stats"] == {"loads_light": 1, "real_imports": 1}


def test_without_a_table_nothing_is_stood_in_and_nothing_leaks():
    r = run("""
        import json, sys
        import torch
        from kcache import _torch_adaptor_imports as L
        with L.light_imports(None):
            none = [m for m in L.COMPILER_MODULES if m in sys.modules]  # not even stand-ins
        with L.light_imports({"mm": "torch:mm"}):
            inside = "torch._inductor.select_algorithm" in sys.modules
        left = "torch._inductor.select_algorithm" in sys.modules
        import torch._inductor.select_algorithm as sa
        print(json.dumps({"none": none, "inside": inside, "left": left,
                          "real": hasattr(sa, "ExternKernelChoice"), "stats": L.stats()}))
        """)
    assert r["none"] == [] and r["inside"] is True and r["left"] is False
    assert r["real"] is True
    assert r["stats"] == {"loads_light": 1, "real_imports": 0}


def test_a_malformed_table_from_a_bundle_is_answered_by_the_real_module():
    # A bundle's table is data: wrong types, unknown locators and names that
    # resolve to nothing fall back to the real extern kernels, never an error.
    r = run("""
        import json, sys
        import torch
        from kcache import _torch_adaptor_imports as L
        bad = {"mm": "torch:no_such_kernel", "addmm": "nonsense", "bmm": 7, 3: "torch:mm"}
        with L.light_imports(bad):
            from torch._inductor.select_algorithm import extern_kernels as ek
            got = {"mm": ek.mm is torch.mm, "addmm": ek.addmm is torch.addmm, "bmm": ek.bmm is torch.bmm}
        with L.light_imports(["not", "a", "dict"]):
            pass
        print(json.dumps({"got": got, "stats": L.stats()}))
        """)
    assert r["got"] == {"mm": True, "addmm": True, "bmm": True}
    assert r["stats"]["real_imports"] >= 1


def test_the_loaders_own_imports_are_stood_in_with_the_same_values():
    # Two modules the load itself imports (issue 52): decomposition, for a
    # function pickled in the graph's kwargs, and cpp_extension, for torch's
    # include and lib paths in each C++ kernel's loader. Their stand-ins give
    # what the real modules give, and the loader still asks for just that.
    r = run("""
        import inspect, json, sys
        import torch
        from kcache import _torch_adaptor_imports as L

        def real_extension():
            mod = sys.modules.get("torch.utils.cpp_extension")
            return mod is not None and not L.is_stand_in(mod)

        with L.light_imports({}):
            from torch._inductor.decomposition import select_decomp_table as standin_decomp
            from torch.utils.cpp_extension import include_paths, library_paths, TORCH_LIB_PATH
            inside = {"paths": [include_paths(), include_paths(torch_include_dirs=False),
                                library_paths(), library_paths("cpu", False), TORCH_LIB_PATH],
                      "imported": L.compiler_modules_imported(), "extension": real_extension()}
            # Asked for something it does not stand in for (torch 2.14 and
            # 2.15 read CUDA_HOME in every kernel's loader, and may set it):
            # the real module answers and takes the write, and the other
            # stand-ins stay (cpp_extension is a leaf).
            from torch.utils import cpp_extension as leaf
            cuda_home = leaf.CUDA_HOME
            leaf.CUDA_HOME = "/kcache-test"
            read_back = leaf.CUDA_HOME
            after_other = [L.compiler_modules_imported(), real_extension()]
            others_stay = L.is_stand_in(sys.modules.get("torch._inductor.decomposition"))
            from torch.utils.cpp_extension import CppExtension
        table = standin_decomp()  # after the load: imports the real module
        from torch._inductor import cpp_builder, decomposition
        from torch.utils import cpp_extension as real
        written = real.CUDA_HOME
        real.CUDA_HOME = cuda_home
        print(json.dumps({
            "read_back": read_back, "written": written, "others_stay": others_stay,
            "inside": inside, "after_other": after_other,
            "real_paths": [real.include_paths(), real.include_paths(torch_include_dirs=False),
                           real.library_paths(), real.library_paths("cpu", False), real.TORCH_LIB_PATH],
            "same_table": table is decomposition.select_decomp_table(),
            "extension_is_real": CppExtension is real.CppExtension,
            "related_args": inspect.getsource(cpp_builder._get_torch_related_args),
            "device_options": inspect.getsource(cpp_builder.get_cpp_torch_device_options),
            "stand_ins_left": [m for m, mod in list(sys.modules.items()) if L.is_stand_in(mod)],
        }))
        """)
    assert r["inside"]["imported"] == [] and r["inside"]["extension"] is False, r["inside"]
    assert r["inside"]["paths"] == r["real_paths"]
    assert r["after_other"] == [[], True]
    assert r["others_stay"] is True
    assert r["read_back"] == r["written"] == "/kcache-test"
    assert r["same_table"] and r["extension_is_real"]
    assert r["stand_ins_left"] == []
    assert "from torch.utils.cpp_extension import include_paths, TORCH_LIB_PATH" in r["related_args"]
    assert "cpp_extension.include_paths(" in r["device_options"]
    assert "cpp_extension.library_paths(" in r["device_options"]
