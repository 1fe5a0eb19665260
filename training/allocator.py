"""How the training process's host memory is handed back to the system (docs/architecture.md, "The training core").

torch's CPU tensors come from the C library's ``malloc``. glibc's threshold above which a block gets its own
``mmap`` (and is unmapped when freed) is dynamic: each time such a block is freed the threshold rises to its
size (up to 32 MiB), so from then on the step's gradients and activations (1-4 MB blocks on SmolLM2) come from
the heap, whose freed middle stays resident. Fixing the threshold (``mallopt(M_MMAP_THRESHOLD)``) keeps every
block above it mapped on its own, so a freed tensor leaves the process's resident memory at once: on the memory
bench (bench/real_model.py --memory, SmolLM2 4x8x64) 130 MiB off the peak, the same losses. The price is kernel
time: each such block is mapped and zero-filled afresh (the KV cache's growing copies while sampling, every
micro-batch's activations), five to six times the system CPU of glibc's own threshold and a fifth to a quarter
more wall time per step (bench/curves/memory_2026-11-27.txt). So it is opt-in: ``train`` fixes it only when
``SEEDBED_MMAP_THRESHOLD`` (bytes, e.g. 65536) is set, for a run that needs those last MiB more than the
time; the default peak fits without it since the output layer's gradient is accumulated in place
(``training.rollout.HeadGradInPlace``). Set in the process itself, not through ``MALLOC_MMAP_THRESHOLD_``: the
worker forks its training processes from a slot whose allocator is already set up, and glibc reads that
variable only at start-up.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

#: blocks at least this large are mapped on their own and returned to the system when freed
MMAP_THRESHOLD_BYTES = 64 * 1024
#: the environment variable that fixes the threshold in ``train`` (bytes); unset or empty: glibc's dynamic one
THRESHOLD_ENV = "SEEDBED_MMAP_THRESHOLD"
M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process (and the children it forks); True when
    set, False where the C library is not glibc (macOS, musl: nothing to do)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1


def mmap_threshold_from_env(environ=os.environ) -> bool:
    """Fix the threshold at ``SEEDBED_MMAP_THRESHOLD`` bytes when that is set (opt-in); True when fixed."""
    value = environ.get(THRESHOLD_ENV, "").strip()
    if not value:
        return False
    try:
        threshold = int(value)
    except ValueError:
        raise ValueError(f"{THRESHOLD_ENV}={value!r}: a size in bytes (e.g. 65536), or unset") from None
    return fix_mmap_threshold(threshold)
