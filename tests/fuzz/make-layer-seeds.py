#!/usr/bin/env python3
"""Writes the seed layers of the layer fuzz target (tests/fuzz/layer.c).

usage: make-layer-seeds.py OUTDIR
Deterministic (fixed names, modes and mtimes). Tar streams are cut after
their end-of-archive blocks, so each seed stays small. The escape seeds
aim at the sentinel beside the tree, each in its own layer, as the first
refused entry ends a layer.
"""
import gzip
import io
import os
import subprocess
import sys
import tarfile

MTIME = 1700000000
SENTINEL = "/dev/shm/nsbox-fuzz-layer/sentinel"


def entry(name, kind=tarfile.REGTYPE, mode=0o644, data=b"", link="", pax=None):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = MTIME
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    if pax:
        info.pax_headers = pax
    return info, data


def tar_bytes(entries, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for info, data in entries:
            t.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    raw = buf.getvalue().rstrip(b"\0")
    # Whole blocks, then the two zero blocks that end an archive.
    blocks = (len(raw) + 511) // 512
    return raw.ljust(blocks * 512, b"\0") + b"\0" * 1024


def main():
    out = sys.argv[1]
    D, L, H, F = tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE
    seeds = {
        "basic.tar": [
            entry("a/", D, 0o755),
            entry("a/file", data=b"hello\n"),
            entry("a/link", L, link="file"),
            entry("a/hard", H, link="a/file"),
            entry("a/fifo", F),
            entry("a/exec", mode=0o4755, data=b"#!/bin/sh\n"),
            entry("closed/", D, 0o000),
            entry("closed/inside", data=b"x"),
        ],
        "whiteouts.tar": [
            entry("etc/.wh.passwd"),
            entry("usr/.wh..wh..opq"),
            entry("usr/new", data=b"new\n"),
            entry(".wh.lib"),
            entry(".wh..wh.plnk"),
        ],
        "replace.tar": [
            entry("lib", D, 0o755),
            entry("etc", data=b"a file over a directory\n"),
            entry("usr/lib/libc.so", L, link="/etc/passwd"),
            entry("abs/etc/through-abs", data=b"x"),
        ],
        "pax-xattrs.tar": [
            entry("x" * 200 + "/long", data=b"long name\n"),
            entry("attrs", data=b"a", pax={"SCHILY.xattr.user.note": "hi",
                                            "SCHILY.xattr.security.capability": "\x01"}),
            entry("dev/null", tarfile.CHRTYPE),
        ],
        "escape-dotdot.tar": [entry("../sentinel/evil", data=b"evil\n")],
        "escape-rel-link.tar": [
            entry("out", L, link="../../sentinel"),
            entry("out/evil", data=b"evil\n"),
        ],
        "escape-lower-link.tar": [entry("sentinel-rel/evil", data=b"evil\n")],
        "escape-abs-link.tar": [entry("sentinel-abs/sub/evil", data=b"evil\n")],
        "escape-up.tar": [entry("up/nsbox-fuzz-layer/sentinel/canary", data=b"evil\n")],
        "escape-hardlink.tar": [entry("h", H, link="sentinel-abs/canary")],
        "escape-whiteout.tar": [entry("sentinel-rel/.wh.canary"), entry("up/.wh..wh..opq")],
        "escape-abs-target.tar": [
            entry("d", L, link=SENTINEL + "/sub"),
            entry("d/", D, 0o777),
        ],
    }
    for name, entries in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(tar_bytes(entries))
    basic = tar_bytes(seeds["basic.tar"])
    with open(os.path.join(out, "basic.tar.gz"), "wb") as f:
        f.write(gzip.compress(basic, mtime=0))
    with open(os.path.join(out, "whiteouts.tar.zst"), "wb") as f:
        f.write(subprocess.run(["zstd", "-q", "-c"], input=tar_bytes(seeds["whiteouts.tar"]),
                               check=True, capture_output=True).stdout)
    # Bomb shapes (rootfs-tools/layer-paths.c limits; the fuzzer's store has
    # small ones: 2048 entries, 4096 inodes, 1 MiB per layer, depth 64).
    # Gzipped: their tar streams are large and repetitive.
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    bombs = {
        # Deep paths parting at the second component: over the depth limit,
        # and just under it (each entry makes 58 new parents).
        "bomb-deep-path": [entry("/".join(["a", letters[i]] + ["a"] * 2046))
                           for i in range(8)],
        "bomb-deep-within": [entry("/".join(["d", letters[i]] + ["a"] * 58))
                             for i in range(52)]
                            + [entry("/".join(["e", letters[i]] + ["b"] * 58))
                               for i in range(52)],
        # Implicit parents: 100 files 40 directories down parents nobody
        # names.
        "bomb-implicit-dirs": [entry(f"p{i}/" + "x/" * 40 + "f") for i in range(100)],
        # Inodes and links of every kind.
        "bomb-inodes": [entry("target", data=b"t")]
                       + [entry(f"s{i}", L, link="target") for i in range(500)]
                       + [entry(f"h{i}", H, link="target") for i in range(500)]
                       + [entry(f"f{i}", F) for i in range(500)]
                       + [entry(f"d{i}/", D, 0o755) for i in range(500)],
        # Bytes of other kinds: 300 directories (4 KiB each) and xattrs.
        "bomb-bytes": [entry(f"d{i}/", D, 0o755) for i in range(300)]
                      + [entry(f"x{i}", pax={"SCHILY.xattr.user.pad": "p" * 60000})
                         for i in range(20)],
        # Paths through symlinks to "." that name one directory again.
        "bomb-aliases": [entry("d/", D, 0o755)]
                        + [entry(f"s{i}", L, link=".") for i in range(30)]
                        + [entry(f"s{i}/s{j}/d/", D, 0o755)
                           for i in range(30) for j in range(30)],
        # 3 MiB of zeros, a few KB compressed.
        "bomb-zeros": [entry(f"z{i}", data=bytes(1 << 20)) for i in range(3)],
    }
    for name, entries in bombs.items():
        with open(os.path.join(out, name + ".tar.gz"), "wb") as f:
            f.write(gzip.compress(tar_bytes(entries), mtime=0))
    with open(os.path.join(out, "gnu.tar"), "wb") as f:
        f.write(tar_bytes([entry("g" * 120, data=b"gnu long name\n"),
                           entry("gl", L, link="t" * 150)], tarfile.GNU_FORMAT))


if __name__ == "__main__":
    main()
