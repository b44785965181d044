"""`heap.trim_heap`: memory freed between live blocks goes back to the system, measured in a
process of its own (this one's heap is the test run's)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from stream_app.service.heap import trim_heap

FRAGMENTED = """
import sys
from stream_app.service.heap import trim_heap

def rss_mib():
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024

blocks = [bytes(2048) for _ in range(40_000)]  # 80 MiB from malloc, below its mmap threshold
kept = blocks[63::64]  # one in 64 stays, the last among them: the freed ones are holes of
# 126 KiB, whole pages even where a page is 64 KiB
del blocks
before = rss_mib()
assert trim_heap()
print(before, rss_mib(), len(kept))
"""


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_the_memory_freed_between_live_blocks_goes_back() -> None:
    out = subprocess.check_output([sys.executable, "-c", FRAGMENTED], text=True, timeout=60)
    before, after, _ = (float(x) for x in out.split())
    assert before - after > 50  # of the 78 MiB freed


def test_a_trim_says_whether_it_could() -> None:
    assert trim_heap() is (platform.libc_ver()[0] == "glibc")
