"""A CPython process whose glibc heap holds live objects, and optionally freed ones.

usage: python3 pyheap.py NAME LIVE_MIB FREED_MIB
Names itself NAME (its comm, so its group). Allocates (LIVE + FREED) MiB of 100 KiB bytes
objects (each one malloc below glibc's mmap threshold, so from the brk heap), then drops
FREED MiB of them spread among the live ones.
Prints "ready FORDBLKS" (glibc's mallinfo2, read through ctypes), then waits as
tests/reproducers/blocked.h does, in the call MEMBLOAT_WAIT_IN names (time.sleep when
unset): signal.pause, time.sleep (clock_nanosleep), os.read on stdin, or a lock's acquire
(a futex, released by a thread that reads stdin). Woken (SIGUSR1, or a byte on stdin), it
prints "woke KIND CALL DATA": CALL "ok" where the wait ended as Python's own code expects,
else "errno=N" for the OSError it raised; DATA "ok" where the live objects hash as before.
"""
import ctypes
import hashlib
import os
import signal
import sys
import threading
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


class Woken(Exception):
    pass


def woken(signum, frame):
    raise Woken()


def digest():
    h = hashlib.sha256()
    for o in objs:
        if o is not None:
            h.update(o)
    return h.digest()


kind = os.environ.get("MEMBLOAT_WAIT_IN", "nanosleep")
start = digest()
signal.signal(signal.SIGUSR1, woken)
lock = threading.Lock()
if kind == "futex":
    lock.acquire()

    def waker():
        while os.read(0, 1):
            lock.release()

    threading.Thread(target=waker, daemon=True).start()
while True:
    call = "ok"
    try:
        if kind == "pause":
            signal.pause()
        elif kind == "read":
            if not os.read(0, 1):
                sys.exit(0)
        elif kind == "futex":
            lock.acquire()
        else:
            time.sleep(3600)
            call = "slept"
    except Woken:
        pass
    except OSError as e:
        call = "errno=%d" % e.errno
    print("woke", kind, call, "ok" if digest() == start else "changed", flush=True)
