"""A fake CUDA driver (libcuda) built from C for tests on machines without a
GPU: the four driver entry points kcache's C++ client calls, answering from
FAKE_CU_* environment variables read at call time."""

from __future__ import annotations

import pathlib
import subprocess

SOURCE = r'''
#include <stdlib.h>
static int env(const char* name, int dflt) {
  const char* v = getenv(name);
  return v ? atoi(v) : dflt;
}
int cuInit(unsigned int flags) { (void)flags; return env("FAKE_CU_INIT_RC", 0); }
int cuDeviceGetCount(int* n) { *n = env("FAKE_CU_COUNT", 1); return 0; }
int cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return 0; }
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  if (attr == 75) { *v = env("FAKE_CU_MAJOR", 9); return 0; }
  if (attr == 76) { *v = env("FAKE_CU_MINOR", 0); return 0; }
  return 1; /* CUDA_ERROR_INVALID_VALUE */
}
'''


def build_fake_driver(directory: pathlib.Path) -> pathlib.Path:
    src = directory / "fake_libcuda.c"
    lib = directory / "fake_libcuda.so"
    src.write_text(SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib
