"""`import kcache` is cheap: it must not import torch."""

import subprocess
import sys


def test_import_does_not_import_torch():
    code = ("import sys, kcache; assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m);"
            "import kcache._core; assert 'torch' not in sys.modules; print(kcache.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.1.0"


def test_compile_integration_imports_torch_lazily():
    code = "import sys, kcache; f = kcache.find_regions; assert 'torch' in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_unknown_attribute_is_an_attribute_error():
    import kcache
    try:
        kcache.no_such_thing  # noqa: B018
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("expected AttributeError")
