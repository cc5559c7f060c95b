"""A fake CUDA driver (libcuda) built from C for tests on machines without a
GPU: the four driver entry points kcache's C++ client calls, answering from
FAKE_CU_* environment variables read at call time.

Each device has its own capability: FAKE_CU_MAJOR_<ordinal> /
FAKE_CU_MINOR_<ordinal>, else FAKE_CU_MAJOR / FAKE_CU_MINOR (9.0). Device
handles are not ordinals (ordinal + 1000), and an ordinal or handle outside
FAKE_CU_COUNT is CUDA_ERROR_INVALID_DEVICE, so a caller that asks another
device, or passes an ordinal where a handle belongs, gets another answer."""

from __future__ import annotations

import pathlib
import subprocess

SOURCE = r'''
#include <stdio.h>
#include <stdlib.h>
static int env(const char* name, int dflt) {
  const char* v = getenv(name);
  return v ? atoi(v) : dflt;
}
static int count(void) { return env("FAKE_CU_COUNT", 1); }
static int per_device(const char* name, int ordinal, int dflt) {
  char indexed[64];
  snprintf(indexed, sizeof indexed, "%s_%d", name, ordinal);
  return env(indexed, env(name, dflt));
}
int cuInit(unsigned int flags) { (void)flags; return env("FAKE_CU_INIT_RC", 0); }
int cuDeviceGetCount(int* n) { *n = count(); return 0; }
int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= count()) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal + 1000;
  return 0;
}
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  int ordinal = dev - 1000;
  if (ordinal < 0 || ordinal >= count()) return 101;
  if (attr == 75) { *v = per_device("FAKE_CU_MAJOR", ordinal, 9); return 0; }
  if (attr == 76) { *v = per_device("FAKE_CU_MINOR", ordinal, 0); return 0; }
  return 1; /* CUDA_ERROR_INVALID_VALUE */
}
'''


def build_fake_driver(directory: pathlib.Path) -> pathlib.Path:
    src = directory / "fake_libcuda.c"
    lib = directory / "fake_libcuda.so"
    src.write_text(SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib
