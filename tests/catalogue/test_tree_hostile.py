"""Hostile OpenWrt trees through `devices --tree` as a user runs it (issue 32): expansion bombs
(a doubling chain of `:=`, a recursive `=` chain, nested `$(foreach)`), a Makefile that
includes itself, include/image.mk a link to /dev/zero, image/Makefile and include/version.mk
FIFOs, a Makefile that is a link out of the tree, a DTS that includes a file outside the tree.
Each ends with one `error:` line and exit 2 (the DTS include: read as "not in the tree",
never opened); the oracles are the kernel's (the child's peak RSS by getrusage under 512
MiB, its end within 10 s, which is the failure mode of a hang) and a secret file outside the
tree whose text must appear in no output. The small tree is test_devtree.py's."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import hostile_images as runner
from tests.catalogue.test_devtree import write_tree

LIMIT_KIB = 512 << 10
DEADLINE = 10.0
IMAGE = "target/linux/fakeath/image/Makefile"
# begins with a character no DTS token begins with: the tokenizer's error quoted from there
SECRET = "$SECRET-6f1d2c (shell touch /tmp/no) <not DTS>"


def tree_with(tmp: Path, change: Callable[[Path], None]) -> Path:
    tree = write_tree(tmp / "openwrt")
    change(tree)
    return tree


def prepend(rel: str, text: str) -> Callable[[Path], None]:
    def change(tree: Path) -> None:
        p = tree / rel
        p.write_text(textwrap.dedent(text) + p.read_text())

    return change


def special(rel: str, kind: str, target: str = "/dev/zero") -> Callable[[Path], None]:
    def change(tree: Path) -> None:
        p = tree / rel
        p.unlink()
        if kind == "fifo":
            os.mkfifo(p)
        else:
            p.symlink_to(target)

    return change


def devices(tmp: Path, tree: Path, *extra: str) -> tuple[int, str, str, int]:
    return runner.bounded_run(tmp, ["devices", "--tree", str(tree), "--target", "fakeath",
                                    *extra], DEADLINE, {"COLUMNS": "250"})  # fmt: skip


def refused(tmp: Path, tree: Path) -> str:
    rc, out, err, rss = devices(tmp, tree)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 2 and "Traceback" not in err and len(lines) == 1, (out + err)[-3000:]
    assert rss < LIMIT_KIB, f"peak RSS {rss} KiB"
    return lines[0]


DOUBLING = "BOMB := x\n" + "BOMB := $(BOMB)$(BOMB)\n" * 40
RECURSIVE = "A0 = x\n" + "".join(f"A{i} = $(A{i - 1})$(A{i - 1})\n" for i in range(1, 61))
RECURSIVE += "X := $(A60)\n"
# 3^60 expansions of nothing: no value grows, only the work does
EMPTIES = "E0 =\n" + "".join(f"E{i} = $(E{i - 1})$(E{i - 1})$(E{i - 1})\n" for i in range(1, 61))
EMPTIES += "X := $(E60)\n"
WORDS = " ".join(str(i) for i in range(100))
# 10^8 iterations that make nothing ($(strip) keeps every level empty), and 10^8 that grow
WORK_BOMB = f"L := {WORDS}\nX := $(foreach a,$(L),$(strip $(foreach b,$(L),$(strip "
WORK_BOMB += "$(foreach c,$(L),$(strip $(foreach d,$(L),)))))))\n"
SIZE_BOMB = f"L := {WORDS}\nX := $(foreach a,$(L),$(foreach b,$(L),$(foreach c,$(L),"
SIZE_BOMB += "$(foreach d,$(L),x))))\n"

CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "doubling :=": (prepend(IMAGE, DOUBLING), "would be"),
    "recursive =": (prepend(IMAGE, RECURSIVE), "would be"),
    "recursive = of nothing": (prepend(IMAGE, EMPTIES), "units of expansion work"),
    "nested foreach": (prepend(IMAGE, WORK_BOMB), "units of expansion work"),
    "growing foreach": (prepend(IMAGE, SIZE_BOMB), "would be"),
    "include Makefile": (prepend(IMAGE, "include Makefile\n"), "nest more than 32 deep"),
    "image.mk -> /dev/zero": (special("include/image.mk", "link"), "leads out of it"),
    "image/Makefile FIFO": (special(IMAGE, "fifo"), "is a FIFO (named pipe), not a file"),
    "version.mk FIFO": (special("include/version.mk", "fifo"), "is a FIFO (named pipe)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_tree_is_one_error_line(case: str, tmp_path: Path) -> None:
    change, said = CASES[case]
    assert said in refused(tmp_path, tree_with(tmp_path, change))


def test_a_makefile_linked_out_of_the_tree_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "victim.mk"
    outside.write_text(f"DEVICE_TITLE := {SECRET[1:]}\nTARGET_DEVICES += x\n")
    tree = tree_with(tmp_path, special(IMAGE, "link", str(outside)))
    rc, out, err, _rss = devices(tmp_path, tree)
    assert rc == 2 and "leads out of it" in err and "Traceback" not in err, out + err
    assert "SECRET" not in out + err


@pytest.mark.parametrize("how", ["relative", "absolute", "fifo"])
def test_a_dts_include_out_of_the_tree_is_never_read(how: str, tmp_path: Path) -> None:
    """The .dts of vendor_router-v1 includes a file beside the tree: a secret (its text
    broke the tokenizer, whose error quoted it) or a FIFO (reading it would hang)."""
    outside = tmp_path / "outside.dtsi"
    if how == "fifo":
        os.mkfifo(outside)
    else:
        outside.write_text(SECRET + "\n")
    name = str(outside) if how == "absolute" else os.path.relpath(
        outside, tmp_path / "openwrt/target/linux/fakeath/dts")  # fmt: skip
    dts = "target/linux/fakeath/dts/qca9531_vendor_router-v1.dts"
    tree = tree_with(tmp_path, prepend(dts, f'#include "{name}"\n'))
    rc, out, err, rss = devices(tmp_path, tree, "--device", "vendor_router-v1")
    assert rc == 0 and "Traceback" not in err, out + err
    assert "SECRET" not in out + err and rss < LIMIT_KIB
    assert "vendor_router-v1 " in out  # still read: its firmware partition from the rest
    assert "0x020000+0x720000" in out


def test_a_dts_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    dts = "target/linux/fakeath/dts/qca9531_vendor_router-v1.dts"
    assert "is a FIFO" in refused(tmp_path, tree_with(tmp_path, special(dts, "fifo")))


def test_shell_in_the_tree_is_never_run(tmp_path: Path) -> None:
    """What is clean stays clean: $(shell), != and $(eval $(shell ...)) run nothing (a
    sentinel file only the shell would create)."""
    s = tmp_path / "sentinel"
    text = f"A != touch {s}-1\nB := $(shell touch {s}-2)\n$(eval $(shell touch {s}-3))\n"
    tree = tree_with(tmp_path, prepend(IMAGE, text))
    rc, out, err, _rss = devices(tmp_path, tree)
    assert rc == 0 and "Traceback" not in err, out + err
    assert not list(tmp_path.glob("sentinel*"))
