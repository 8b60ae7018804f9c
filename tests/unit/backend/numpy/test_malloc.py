"""glibc's allocator keeps freed activation-sized blocks (kernels/malloc.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

# allocate, touch and free a 4 MiB array 200 times; print the page faults it took
_PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] == "ember":
    import ember.backend.numpy.backend  # noqa: F401  (tunes the allocator at import)
    from ember.backend.numpy.kernels import malloc
    assert malloc.tune()
a = np.ones(1 << 20, dtype=np.float32); del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    a = np.ones(1 << 20, dtype=np.float32)
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, **env: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def test_freed_blocks_are_reused() -> None:
    from ember.backend.numpy.kernels import malloc

    if not malloc.tune():
        pytest.skip("not glibc")
    plain = _faults("plain")
    tuned = _faults("ember")
    # untuned, each 4 MiB array is a fresh mapping: ~1024 faults (4 KiB pages) each, or a few
    # with transparent huge pages; tuned, the same block comes back with its pages mapped
    assert tuned < 50, (plain, tuned)


def test_opt_out_leaves_the_allocator() -> None:
    probe = "import os; os.environ['EMBER_MALLOC']='default'\n" + _PROBE.replace(
        "assert malloc.tune()", "assert not malloc.tune()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "ember"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
