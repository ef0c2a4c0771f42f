"""Hostile-input families for bench/bad_inputs.py (issue 32): the bounded readers of images and
trees. Generated from tests/hostile_images.py's makers and test_devtree.py's small tree, with
these oracles besides the runner's own (traceback, error line, hang):

- time and peak memory: every run goes through this file's ``--measure`` wrapper, which
  reports the child's peak RSS and CPU time (getrusage by wait4); over 512 MiB or 10 s of CPU
  is a "wrong" finding (CPU, not wall time: the bench shares 2 cores with a build);
- a run that must refuse its input and exits 0 is "wrong";
- files left in the run's cache (an unpacked rootfs, a temporary file) are "leftover";
- a secret in a file outside the tree that the tree links to or includes must appear in no
  output ("security"), that file must stay as it was ("data loss"), and a sentinel only
  `$(shell)` would create must not appear.

    .venv/bin/python bench/bad_inputs.py --family "image readers,tree readers" --timeout 30
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostile import Finding, Probe, fails  # noqa: E402  (bench/hostile.py)

from tests import hostile_images as craft  # noqa: E402

FAMILIES = ("image readers", "tree readers")
MAX_RSS_KIB = 512 << 10
MAX_CPU = 10.0
AR300 = "glinet_gl-ar300m16"
SYSUPGRADE = f"openwrt-25.12.5-ath79-generic-{AR300}-squashfs-sysupgrade.bin"
MEASURE = [sys.executable, str(Path(__file__).resolve()), "--measure", "--"]
_MEASURED = re.compile(r"^wolf-bench: peak RSS (\d+) KiB, CPU ([\d.]+) s$", re.M)
Check = Callable[[subprocess.CompletedProcess[str]], Finding | None]


def measure(argv: list[str]) -> int:
    """Run argv (stdio inherited) and say its peak RSS and CPU time on stderr: the wrapper
    is small, so the child's getrusage is the child's own."""
    p = subprocess.Popen(argv)
    _, status, usage = os.wait4(p.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    print(f"wolf-bench: peak RSS {usage.ru_maxrss} KiB, CPU {cpu:.1f} s", file=sys.stderr)
    return os.waitstatus_to_exitcode(status)


_SEEN: list[tuple[int, float, str]] = []  # (peak RSS KiB, CPU s, run) of every measured run


@atexit.register
def _summary() -> None:
    if _SEEN:
        rss, cpu = max(_SEEN), max(_SEEN, key=lambda s: s[1])
        print(f"hostile readers: {len(_SEEN)} runs measured; most memory {rss[0] >> 10} MiB "
              f"({rss[2][:80]}), most CPU {cpu[1]:.1f} s ({cpu[2][:80]})")  # fmt: skip


def bounded(refuse: bool) -> Check:
    """The time and memory oracle; with ``refuse``, exit 0 is a wrong result too."""

    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        m = _MEASURED.search(p.stderr)
        if m is None:
            return None  # killed before it could say (the runner counts a hang)
        rss, cpu = int(m.group(1)), float(m.group(2))
        _SEEN.append((rss, cpu, " ".join(str(a) for a in p.args[len(MEASURE) + 3 :])))
        if rss > MAX_RSS_KIB:
            return "wrong", f"peak RSS {rss >> 10} MiB, more than {MAX_RSS_KIB >> 10} MiB"
        if cpu > MAX_CPU:
            return "wrong", f"{cpu:.1f} s of CPU, more than {MAX_CPU:.0f} s"
        return fails(p) if refuse else None

    return check


def _exits_zero(p: subprocess.CompletedProcess[str]) -> Finding | None:
    if p.returncode != 0:
        return "wrong", f"exit {p.returncode}: a DTS include out of the tree is 'not in the tree'"
    return None


def _both(a: Check, b: Check) -> Check:
    return lambda p: a(p) or b(p)


def _probe(
    argv: list[str], *, refuse: bool = True, after: Callable[[], Finding | None] | None = None
) -> Probe:
    return Probe(argv, check=bounded(refuse), prefix=MEASURE, after=after)


# --- images and root filesystems -----------------------------------------------------


def _cache_clean(cache: Path) -> Callable[[], Finding | None]:
    """Nothing but measurements (JSON) and xz sizes in the runs' cache afterwards."""

    def check() -> Finding | None:
        left = [p for p in cache.rglob("*") if p.is_file() and "/size-report/unpacked/" in str(p)]
        left += [p for p in cache.rglob("*.tmp") if p.is_file()]
        if left:
            return "leftover", f"{len(left)} files left in the cache: {left[0]}"
        return None

    return check


def images_family(w: Path) -> list[Probe]:
    """Crafted rootfs images in each place size-report --from takes them (the file, a uImage
    sysupgrade, a directory's root.squashfs or sysupgrade image), images for fit --image and
    what-if --image, fwtool chains, and gzip bombs as malta's rootfs."""
    from tests.sqfs_kit import ath79_sysupgrade, uimage_kernel

    top = w / "readers"
    top.mkdir()
    cache = w / "cache"
    after = _cache_clean(cache)
    kernel = uimage_kernel(top / "kernel.bin", 100_000)
    pk = top / "packages"  # an empty package index: what-if reads the image next
    pk.mkdir()
    (pk / "index.json").write_text("[]")
    rootfs: dict[str, Callable[[Path], Path]] = {
        "root lists itself": lambda d: craft.looping(d),
        "root lists itself, 2^32-1 inodes": lambda d: craft.looping(d, inode_count=2**32 - 1),
        "2^32-1 inodes": lambda d: craft.inode_count(d, 2**32 - 1),
        "2^20 inodes": lambda d: craft.inode_count(d, 1 << 20),
        "a 65535-byte listing": lambda d: craft.listing_size(d, 65535),
        "2^32-1 fragments": lambda d: craft.superblock_field(d, 16, 2**32 - 1),
        "384 MiB sparse library": lambda d: craft.sparse_library(d, 384 << 20),
        "1.5 GiB sparse library": lambda d: craft.sparse_library(d, 1536 << 20),
        "64 MiB zstd zeros": lambda d: craft.sparse_library(d, 64 << 20, zeros=True),
        "64 MiB gzip zeros": lambda d: craft.sparse_library(d, 64 << 20, zeros=True, comp="gzip"),
        "17 MiB zstd zeros": lambda d: craft.sparse_library(d, 17 << 20, zeros=True),
    }
    out: list[Probe] = []
    for i, (_name, make) in enumerate(rootfs.items()):
        d = top / f"rootfs-{i}"
        d.mkdir()
        fs = make(d)
        image = ath79_sysupgrade(kernel, fs, d / SYSUPGRADE)
        (d / "dir-root").mkdir()
        (d / "dir-root" / "root.squashfs").write_bytes(fs.read_bytes())
        (d / "dir-image").mkdir()
        (d / "dir-image" / SYSUPGRADE).write_bytes(image.read_bytes())
        for src in (fs, image, d / "dir-root", d / "dir-image"):
            out.append(_probe(["size-report", "--from", str(src)], after=after))
        out.append(
            _probe(["fit", "--device", "gl-ar300m16", "--image", str(image)], refuse=False)
        )  # fmt: skip  (fit reads no rootfs beyond its size)
        out.append(_probe(["what-if", "--image", str(image), "--flavour", "wolfssl",
                           "--packages", str(pk)], after=after))  # fmt: skip
    good = craft.good(top)
    image = ath79_sysupgrade(kernel, good, top / SYSUPGRADE)
    for n in (150_000, 20_000, 4_097):  # 4,097 empty chunks: just past fwtool's 64 KiB
        chained = top / f"chain-{n}" / SYSUPGRADE
        chained.parent.mkdir()
        chained.write_bytes(craft.fwtool_chain(image.read_bytes(), n))
        for argv in (["fit", "--device", "gl-ar300m16", "--image"], ["size-report", "--from"]):
            out.append(_probe([*argv, str(chained)], after=after))
        out.append(_probe(["what-if", "--image", str(chained), "--flavour", "wolfssl",
                           "--packages", str(pk)]))  # fmt: skip
    ok = top / "chain-4000" / SYSUPGRADE  # 64,000 bytes of chunks: read, every CRC checked
    ok.parent.mkdir()
    ok.write_bytes(craft.fwtool_chain(image.read_bytes(), 4_000))
    out.append(_probe(["fit", "--device", "gl-ar300m16", "--image", str(ok)], refuse=False))
    for claim in (1536 << 20, 300 << 20, 200 << 20, 100 << 20):
        d = top / f"gz-{claim >> 20}"
        d.mkdir()
        gz = craft.gzip_bomb(good, d / "openwrt-malta-be-rootfs-squashfs.img.gz", claim)
        (d / "openwrt-malta-be-vmlinux-initramfs.elf").write_bytes(b"\x7fELF" + bytes(64))
        out.append(_probe(["size-report", "--from", str(gz)], after=after))
        out.append(_probe(["size-report", "--from", str(d)], after=after))
        out.append(_probe(["fit", "--device", "gl-ar300m16", "--image", str(gz)]))
        out.append(_probe(["what-if", "--image", str(gz), "--flavour", "wolfssl",
                           "--packages", str(pk)], after=after))  # fmt: skip
    cut = top / "gz-cut" / "openwrt-malta-be-rootfs-squashfs.img.gz"  # ends mid-stream
    cut.parent.mkdir()
    whole = (top / "gz-100" / cut.name).read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    noise = top / "gz-noise" / cut.name  # a gzip header, then random bytes
    noise.parent.mkdir()
    noise.write_bytes(whole[:10] + os.urandom(100_000))
    for gz in (cut, noise):
        out.append(_probe(["size-report", "--from", str(gz)], after=after))
    return out


# --- trees and Makefiles ---------------------------------------------------------------

IMAGE = "target/linux/fakeath/image/Makefile"
DTS = "target/linux/fakeath/dts/qca9531_vendor_router-v1.dts"
WORDS = " ".join(str(i) for i in range(100))
BIG = "BIG := " + "a" * 30_000 + "\n"
BOMBS: dict[str, str] = {
    "doubling := x30": "B := x\n" + "B := $(B)$(B)\n" * 30,
    "doubling := x64": "B := x\n" + "B := $(B)$(B)\n" * 64,
    "doubling +=": "B := x\n" + "B += $(B)\n" * 40,
    "recursive = x40": "A0 = x\n"
    + "".join(f"A{i} = $(A{i - 1})$(A{i - 1})\n" for i in range(1, 41))
    + "X := $(A40)\n",
    "recursive = of nothing": "E0 =\n"
    + "".join(f"E{i} = $(E{i - 1})$(E{i - 1})$(E{i - 1})\n" for i in range(1, 61))
    + "X := $(E60)\n",
    "foreach 4x100, empty": f"L := {WORDS}\nX := $(foreach a,$(L),$(strip $(foreach b,$(L),"
    "$(strip $(foreach c,$(L),$(strip $(foreach d,$(L),)))))))\n",
    "foreach 4x100, growing": f"L := {WORDS}\nX := $(foreach a,$(L),$(foreach b,$(L),"
    "$(foreach c,$(L),$(foreach d,$(L),x))))\n",
    "foreach 3x1000": "L := " + " ".join(str(i) for i in range(1000)) + "\n"
    "X := $(foreach a,$(L),$(strip $(foreach b,$(L),$(strip $(foreach c,$(L),))))))\n",
    "subst": BIG + "X := $(subst a,$(BIG),$(BIG))\n",
    "patsubst": BIG + "L := " + "w " * 10_000 + "\nX := $(patsubst %,$(BIG),$(L))\n",
    "addprefix": BIG + "L := " + "w " * 10_000 + "\nX := $(addprefix $(BIG),$(L))\n",
    "deep $(if)": "X := " + "$(if x," * 3000 + ")" * 3000 + "\n",
    "eval loop": "X := $$(Y)\nY := $$(X)\n$(X)\n",
    "eval of itself": "define E\n$$(eval $$(E))\nendef\n$(eval $(E))\n",
    "include itself": "include Makefile\n",
    "include loop": "include generic.mk\n",  # with generic.mk including Makefile (below)
    "include via eval": "$(eval include Makefile)\n",
    "override x20000": "override " * 20_000 + "A := x\n",
    "continuations x500000": "A := x \\\n" * 500_000 + "\n",
    "escaped # x1000000": "A := " + "\\#" * 1_000_000 + "\n",
    "word of 5000 digits": "A := $(word " + "9" * 5000 + ",a b)\n",
    "quotes x100000": 'ifeq "' + '\\" ' * 100_000 + '"\nA := 1\nendif\n',
}
# what make itself calls an error: the image Makefile is "not read" in a note (exit 0)
MAKE_ERRORS = ("word of 5000 digits", "quotes x100000", "deep $(if)", "override x20000")
LINKS_OUT = ("link to /dev/zero", "link out")
SPECIAL_PLACES = (IMAGE, "include/image.mk", "include/version.mk",
                  "target/linux/fakeath/Makefile", "target/linux/fakeath/generic/target.mk",
                  "target/linux/fakeath/image/generic.mk", "config/Config-images.in",
                  "scripts/target-metadata.pl", DTS,
                  "target/linux/fakeath/dts/qca9531.dtsi")  # fmt: skip
SPECIAL_KINDS = ("fifo", "link to /dev/zero", "link out", "char device", "directory",
                 "5 MiB sparse", "symlink loop", "dangling link")  # fmt: skip


def _special(p: Path, kind: str, victim: Path) -> None:
    p.unlink()
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "link to /dev/zero":
        p.symlink_to("/dev/zero")
    elif kind == "link out":
        p.symlink_to(victim)
    elif kind == "char device":
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:  # not root: a link to it instead
            p.symlink_to("/dev/zero")
    elif kind == "directory":
        p.mkdir()
    elif kind == "5 MiB sparse":
        with p.open("wb") as fh:
            fh.truncate(5 << 20)
    elif kind == "symlink loop":
        p.symlink_to(p.name)
    else:
        p.symlink_to(p.parent / "nowhere")


def trees_family(w: Path) -> list[Probe]:
    """test_devtree.py's tree with a Make bomb in its image Makefile, a special file or a link
    out where each file it reads belongs, DTS includes out of the tree, broken Kconfig
    conditions, and $(shell) with a sentinel."""
    from tests.catalogue.test_devtree import write_tree
    from tests.catalogue.test_tree_hostile import prepend

    top = w / "trees-hostile"
    top.mkdir()
    victim = top / "victim.mk"  # outside every tree: a link to it is never read
    secret = "$WOLF-SECRET-3c9e1a (not make, not DTS)"
    victim.write_text(secret + "\n")
    kept = victim.read_bytes()
    sentinel = top / "sentinel"

    def victim_kept() -> Finding | None:
        if not victim.is_file() or victim.read_bytes() != kept:
            return "data loss", f"{victim} changed"
        return None

    n = 0

    def tree(change: Callable[[Path], None]) -> Path:
        nonlocal n
        n += 1
        t = write_tree(top / f"t{n}")
        change(t)
        return t

    def run(t: Path, *extra: str, refuse: bool = True, check: Check | None = None) -> Probe:
        argv = ["devices", "--tree", str(t), "--target", "fakeath", *extra]
        c = bounded(refuse) if check is None else _both(bounded(False), check)
        return Probe(argv, check=c, prefix=MEASURE, secrets=(secret[1:19],), sentinel=sentinel,
                     after=victim_kept)  # fmt: skip

    out: list[Probe] = []
    for name, text in BOMBS.items():

        def change(t: Path, text: str = text, name: str = name) -> None:
            prepend(IMAGE, text)(t)
            if name == "include loop":
                prepend("target/linux/fakeath/image/generic.mk", "include Makefile\n")(t)

        # a bomb is refused; what make itself calls an error is a note (exit 0)
        out.append(run(tree(change), refuse=name not in MAKE_ERRORS))
    for rel in SPECIAL_PLACES:
        for kind in SPECIAL_KINDS:
            t = tree(lambda t, rel=rel, kind=kind: _special(t / rel, kind, victim))
            # a DTS or .dtsi that leads out of the tree is "not in the tree" (exit 0)
            out.append(run(t, refuse=not (rel.endswith((".dts", ".dtsi")) and kind in LINKS_OUT)))
    for how in ("relative", "absolute", "fifo outside", "link in the tree", "/dev/zero",
                "/proc/self/environ", "dts link out"):  # fmt: skip

        def dts_change(t: Path, how: str = how) -> None:
            d = t / "target/linux/fakeath/dts"
            name = {"relative": os.path.relpath(victim, d), "absolute": str(victim),
                    "/dev/zero": "/dev/zero", "/proc/self/environ": "/proc/self/environ",
                    "link in the tree": "inside.dtsi", "dts link out": "",
                    "fifo outside": str(top / "outside.fifo")}[how]  # fmt: skip
            if how == "fifo outside" and not (top / "outside.fifo").exists():
                os.mkfifo(top / "outside.fifo")
            if how == "link in the tree":
                (d / "inside.dtsi").symlink_to(victim)
            if how == "dts link out":
                (d / "qca9531_vendor_router-v1.dts").unlink()
                (d / "qca9531_vendor_router-v1.dts").symlink_to(victim)
                return
            prepend(DTS, f'#include "{name}"\n')(t)

        out.append(run(tree(dts_change), "--device", "vendor_router-v1", refuse=False,
                       check=_exits_zero))  # fmt: skip
    dts_bombs = {
        "braces x10000": "/ { " + "a { " * 10_000 + "}; " * 10_000 + "};\n",
        "/* x1000000": "/*" * 1_000_000,
        "blank lines x4000000": "\n" * 4_000_000,
        "&{/n/n/...} x100000": "/ { }; &{/" + "/".join(["n"] * 100_000) + "} { x; };\n",
    }
    for text in dts_bombs.values():
        out.append(run(tree(prepend("target/linux/fakeath/dts/qca9531.dtsi", text)),
                       refuse=False))  # fmt: skip

    def include_dag(t: Path) -> None:  # each of 22 .dtsi includes the next twice
        d = t / "target/linux/fakeath/dts"
        for i in range(22):
            (d / f"dag{i}.dtsi").write_text(f'#include "dag{i + 1}.dtsi"\n' * 2 + "/ { };\n")
        (d / "dag22.dtsi").write_text("/ { x { y = <1 2 3 4 5 6 7 8>; }; };\n")
        prepend(DTS, '#include "dag0.dtsi"\n')(t)

    out.append(run(tree(include_dag), refuse=False))
    conds = {
        "(": True,
        "!" * 5000 + "A": True,
        "(" * 500 + "A" + ")" * 500: True,
        "A &&": True,
        "||": False,
    }  # fmt: skip  ("||" reads as false, as Kconfig's)
    for cond, refuse in conds.items():
        conf = "config/Config-images.in"
        text = f"\t\tconfig TARGET_SQUASHFS_BLOCK_SIZE\n\t\t\tdefault 64 if {cond}\n\t\t\thelp\n"
        out.append(run(tree(lambda t, text=text, conf=conf: (t / conf).write_text(text)),
                       refuse=refuse))  # fmt: skip
    for text in (f"A != touch {sentinel}\n", f"A := $(shell touch {sentinel})\n",
                 f"$(eval $(shell touch {sentinel}))\n", f"A = $(shell touch {sentinel})\n"
                 "B := $(A)\n", f"$(file >{sentinel},x)\n"):  # fmt: skip
        out.append(run(tree(prepend(IMAGE, text)), refuse=False))
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["--measure"]:
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(measure(sys.argv[3:]))
