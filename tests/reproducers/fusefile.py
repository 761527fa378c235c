"""A FUSE filesystem of one file, a copy of PROGRAM at /prog: a tenant's own server, as any
user can mount one in a user namespace. While the file HOLD exists, every request waits
(the server holds each read, as a hostile one would). Prints "ready" once mounted.

    fusefile.py PROGRAM MOUNTPOINT HOLD
"""
import errno
import os
import stat
import sys
import time

from fusepy import FUSE, FuseOSError, Operations

program, mountpoint, hold = sys.argv[1:4]
with open(program, "rb") as f:
    data = f.read()


def wait():
    while os.path.exists(hold):
        time.sleep(0.01)


class One(Operations):
    def init(self, path):
        print("ready", flush=True)

    def getattr(self, path, fh=None):
        wait()
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/prog":
            return dict(st_mode=stat.S_IFREG | 0o755, st_nlink=1, st_size=len(data))
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        wait()
        return [".", "..", "prog"]

    def open(self, path, flags):
        wait()
        return 0

    def read(self, path, size, offset, fh):
        wait()
        return data[offset : offset + size]


FUSE(One(), mountpoint, foreground=True, allow_other=True, ro=True)
