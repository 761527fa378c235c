"""Small objects over many of pymalloc's size classes, a random share of them dropped:
the arenas that keep one live object stay. Prints "ready" once sys._debugmallocstats()
has written CPython's own figures into STATS, and again after each line read from stdin
(each time with the figures written afresh); nothing is allocated between the figures and
the read that blocks.

    pyarenas.py SEED OBJECTS DROP_PERCENT STATS
"""
import gc
import io
import os
import random
import sys

seed, objects, drop, stats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)


def make(i):
    kind = rng.randrange(6)
    if kind == 0:
        return bytes(rng.randrange(0, 470))
    if kind == 1:
        return tuple(range(rng.randrange(0, 50)))
    if kind == 2:
        return float(i)
    if kind == 3:
        return 10**9 + i
    if kind == 4:
        return "s" * rng.randrange(0, 400)
    return [i] * rng.randrange(0, 8)


kept = [make(i) for i in range(objects)]
for i in rng.sample(range(objects), objects * drop // 100):
    kept[i] = None
gc.collect()
fd = os.open(stats, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
# os.read would allocate its result before it blocks: read into a buffer made here.
line = bytearray(64)
stdin = io.FileIO(0, closefd=False)
while True:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, 0)
    os.dup2(fd, 2)
    sys._debugmallocstats()
    os.write(1, b"ready\n")
    if not stdin.readinto(line):
        break
