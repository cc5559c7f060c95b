"""The CUDA target as the C++ client sees it (dlopen of the driver) and as
Python's keys see it (torch.cuda.get_device_capability) agree, without a GPU:
the driver is a fake built from C here, torch's answer is monkeypatched."""

from __future__ import annotations

import subprocess

import pytest
import torch

from fake_cuda import build_fake_driver
from kcache import _core
from kcache.keys import fields as keyfields


@pytest.fixture
def fake_driver(tmp_path, monkeypatch):
    lib = build_fake_driver(tmp_path)
    monkeypatch.setenv("KCACHE_CUDA_DRIVER", str(lib))
    monkeypatch.delenv("KCACHE_TARGET", raising=False)
    for name in ("FAKE_CU_INIT_RC", "FAKE_CU_COUNT", "FAKE_CU_MAJOR", "FAKE_CU_MINOR",
                 *(f"FAKE_CU_{part}_{i}" for part in ("MAJOR", "MINOR") for i in range(4))):
        monkeypatch.delenv(name, raising=False)
    return lib


@pytest.mark.parametrize("cap", [(9, 0), (8, 0), (8, 6), (10, 0)])
def test_cpp_and_python_agree(fake_driver, monkeypatch, cap):
    monkeypatch.setenv("FAKE_CU_MAJOR", str(cap[0]))
    monkeypatch.setenv("FAKE_CU_MINOR", str(cap[1]))
    asked = []

    def capability(device=None):
        asked.append(device)
        return cap

    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    cpp = _core.cuda_target()
    assert cpp == f"cuda:sm_{cap[0]}{cap[1]}"
    assert keyfields.target_field("cuda") == cpp
    assert keyfields.short_target("cuda") == cpp
    assert asked == [0, 0]  # device 0, the device every rank must see as its own
    info = _core.cuda_device_info()
    assert (info["major"], info["minor"], info["device_count"]) == (*cap, 1)
    assert info["driver"] == str(fake_driver)


def test_both_sides_ask_device_0_of_several(fake_driver, monkeypatch):
    """Two GPUs of different types (device 0 is sm_90, device 1 sm_80): both
    sides must report device 0, the device every rank sees as its own."""
    caps = {0: (9, 0), 1: (8, 0)}
    monkeypatch.setenv("FAKE_CU_COUNT", "2")
    for i, (major, minor) in caps.items():
        monkeypatch.setenv(f"FAKE_CU_MAJOR_{i}", str(major))
        monkeypatch.setenv(f"FAKE_CU_MINOR_{i}", str(minor))

    def capability(device=None):  # no device: the current one, here cuda:1
        index = 1 if device is None else device if isinstance(device, int) else torch.device(device).index
        return caps[index]

    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    assert _core.cuda_target() == "cuda:sm_90"
    assert keyfields.target_field("cuda") == "cuda:sm_90"
    assert keyfields.short_target("cuda") == "cuda:sm_90"
    info = _core.cuda_device_info()
    assert (info["major"], info["minor"], info["device_count"]) == (9, 0, 2)


@pytest.mark.parametrize("padded", [" cuda:sm_90 ", "\tcuda:sm_90\n"])
def test_override_is_trimmed_on_both_sides(fake_driver, monkeypatch, padded):
    from kcache.keys.fields import CompileSettings, all_fields

    monkeypatch.setenv("FAKE_CU_MAJOR", "8")  # the driver says sm_80: the override must win
    monkeypatch.setenv("KCACHE_LOCAL_DIR", "none")
    monkeypatch.delenv("KCACHE_URL", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))

    def seen():
        fields = all_fields("grad=0\n0=in:act:T[float32;4;contig;rg=0;cuda]", CompileSettings(),
                            False, "cuda", toolchain="t", env="{}")
        key = _core.compute_key({k: v.encode() for k, v in fields.items()})
        client = _core.Client.from_env()
        return (_core.cuda_target(), keyfields.target_field("cuda"), keyfields.short_target("cuda"),
                key, client.config["target"])

    monkeypatch.setenv("KCACHE_TARGET", "cuda:sm_90")
    plain = seen()
    monkeypatch.setenv("KCACHE_TARGET", padded)
    assert seen() == plain
    assert plain[:3] == ("cuda:sm_90",) * 3
    monkeypatch.setenv("KCACHE_TARGET", "  ")  # blank is unset: the driver's device 0
    assert _core.cuda_target() == "cuda:sm_80"
    assert keyfields.target_field("cuda") == "cuda:sm_80"


def test_override_wins_on_both_sides(fake_driver, monkeypatch):
    monkeypatch.setenv("KCACHE_TARGET", "cuda:sm_80")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert _core.cuda_target() == "cuda:sm_80"
    assert keyfields.target_field("cuda") == "cuda:sm_80"
    assert _core.cuda_target(use_override=False) == "cuda:sm_90"


def test_no_device(fake_driver, monkeypatch):
    monkeypatch.setenv("FAKE_CU_COUNT", "0")
    with pytest.raises(_core.KcacheError, match=r"no CUDA device \(cuDeviceGetCount = 0\)") as e:
        _core.cuda_target()
    assert e.value.code == "not_found"


def test_cuinit_failure(fake_driver, monkeypatch):
    monkeypatch.setenv("FAKE_CU_INIT_RC", "100")  # CUDA_ERROR_NO_DEVICE
    with pytest.raises(_core.KcacheError, match=r"cuInit failed \(error 100\)") as e:
        _core.cuda_target()
    assert e.value.code == "unavailable"


def test_no_driver(tmp_path, monkeypatch):
    monkeypatch.delenv("KCACHE_TARGET", raising=False)
    monkeypatch.setenv("KCACHE_CUDA_DRIVER", str(tmp_path / "absent" / "libcuda.so.1"))
    with pytest.raises(_core.KcacheError, match="no CUDA driver") as e:
        _core.cuda_target()
    assert e.value.code == "unavailable"


def test_a_library_without_the_driver_api_is_no_driver(tmp_path, monkeypatch):
    src = tmp_path / "empty.c"
    src.write_text("int not_cuda(void) { return 0; }\n")
    lib = tmp_path / "libempty.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    monkeypatch.delenv("KCACHE_TARGET", raising=False)
    monkeypatch.setenv("KCACHE_CUDA_DRIVER", str(lib))
    with pytest.raises(_core.KcacheError, match="lacks the driver API entry points"):
        _core.cuda_target()


def test_keys_differ_by_sm_arch():
    from kcache.keys.fields import CompileSettings, all_fields

    def key(target):
        fields = all_fields("grad=0\n0=in:act:T[float32;4;contig;rg=0;cuda]", CompileSettings(),
                            False, "cuda", target=target, toolchain="t", env="{}")
        return _core.compute_key({k: v.encode() for k, v in fields.items()})

    assert key("cuda:sm_80") != key("cuda:sm_90")
    assert key("cuda:sm_90") == key("cuda:sm_90")
