#!/usr/bin/env python3
"""Writes the small hand-made layer tarballs of the registry test images.

usage: make_layers.py OUTDIR
Deterministic: fixed mtimes, owners and contents (random bytes come from a
seeded generator), so the layers hash the same on every run.
"""
import io
import os
import random
import sys
import tarfile


def add_file(t, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 1700000000
    t.addfile(info, io.BytesIO(data))


def add_dir(t, name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = 1700000000
    t.addfile(info)


def main():
    out = sys.argv[1]
    with tarfile.open(os.path.join(out, "base.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        add_dir(t, "etc")
        add_file(t, "etc/hello.txt", b"hello from the base layer\n")
        add_dir(t, "bin")
        add_file(t, "bin/tool", b"#!/bin/sh\necho tool\n", 0o755)
    with tarfile.open(os.path.join(out, "top.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        add_dir(t, "etc")
        add_file(t, "etc/top.txt", b"top layer\n")
    # Incompressible, so the gzip blob is as large as the data: long enough
    # to cut in the middle and to watch a slow transfer.
    rng = random.Random(42)
    with tarfile.open(os.path.join(out, "big.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        add_file(t, "big.bin", rng.randbytes(2 * 1024 * 1024))
    for arch in ("amd64", "arm64"):
        with tarfile.open(os.path.join(out, f"arch-{arch}.tar"), "w") as t:
            add_file(t, "arch.txt", f"{arch}\n".encode())


if __name__ == "__main__":
    main()
