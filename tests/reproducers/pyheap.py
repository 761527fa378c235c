"""A CPython process whose glibc heap holds live objects, and optionally freed ones.

usage: python3 pyheap.py NAME LIVE_MIB FREED_MIB
Names itself NAME (its comm, so its group). Allocates (LIVE + FREED) MiB of 100 KiB bytes
objects (each one malloc below glibc's mmap threshold, so from the brk heap), then drops
FREED MiB of them spread among the live ones.
Prints "ready FORDBLKS" (glibc's mallinfo2, read through ctypes) and sleeps.
"""
import ctypes
import sys
import time


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


libc = ctypes.CDLL(None)
libc.prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME
live_mib, freed_mib = int(sys.argv[2]), int(sys.argv[3])
size = 100 * 1024
count = (live_mib + freed_mib) * 1024 * 1024 // size
objs = [bytes([1]) * size for _ in range(count)]
drop = freed_mib * 1024 * 1024 // size
for i in range(drop):
    objs[i * count // drop] = None
libc.mallinfo2.restype = MallInfo2
print("ready", libc.mallinfo2().fordblks, flush=True)
while True:
    time.sleep(3600)
