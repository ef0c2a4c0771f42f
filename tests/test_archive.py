"""openwrt_wolf.files.archive, the one way an archive from outside is unpacked. The oracles:
a victim directory beside the root (its files' bytes, modes and existence), every path outside
the root, Python's own ``data`` extraction filter where this Python has it (3.11.4+; Debian
12's 3.11.2 has none, and the same code runs there), the peak RSS of a child process
(tests/peak.py)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.files import archive
from tests import hostile_archives as hostile
from tests import peak, tree_bombs

ROOT = Path(__file__).resolve().parent.parent
CASES = hostile.cases(Path("/victim-placeholder"))  # names only; rebuilt per test


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A case that hangs fails after 60 s instead of holding the run."""

    def fail(signum: int, frame: object) -> None:
        raise TimeoutError("hung")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _case(label: str, victim: Path) -> hostile.Case:
    return next(c for c in hostile.cases(victim) if c.label == label)


@pytest.mark.parametrize("label", [c.label for c in CASES])
def test_hostile_archive(label: str, tmp_path: Path, no_hang: None) -> None:
    v = hostile.Victim(tmp_path)
    v.plant()
    case = _case(label, v.dir)
    src = hostile.write(case, tmp_path / "case.tar")
    root = tmp_path / "root"
    listing = tmp_path / "listing-root"  # members() alone writes nothing
    if case.expect == "refused":
        with pytest.raises(archive.ArchiveError) as e:
            archive.extract(src, root, archive.PACKAGE, what="package")
        assert str(src) in str(e.value) and "\n" not in str(e.value)
    else:
        archive.extract(src, root, archive.PACKAGE, what="package")
        assert list(archive.members(src, archive.PACKAGE))  # the listing reads it too
    assert v.changes() == []
    assert sorted(hostile.outside(tmp_path, [root, v.dir, listing])) == ["case.tar"]


def test_hard_link_then_file_keeps_the_first_name(tmp_path: Path) -> None:
    src = hostile.write(_case("hardlink/inside-then-file", tmp_path), tmp_path / "a.tar")
    archive.extract(src, tmp_path / "root", archive.PACKAGE)
    assert (tmp_path / "root/a").read_bytes() == b"orig\n"
    assert (tmp_path / "root/b").read_bytes() == b"new\n"
    assert (tmp_path / "root/a").stat().st_ino != (tmp_path / "root/b").stat().st_ino


# --- the data filter's result, with and without Python's filters ---------------------------

GOOD = (
    hostile.Entry(
        "file", "./usr/lib/libwolfssl.so.5.9.2", b"\x7fELF" + bytes(range(256)), mode=0o4775
    ),
    hostile.Entry("symlink", "usr/lib/libwolfssl.so", link="libwolfssl.so.5.9.2", mode=0o777),
    hostile.Entry("file", "/etc/ssl/openssl.cnf", b"[ req ]\n", mode=0o666),
    hostile.Entry("file", "etc/ro", b"ro\n", mode=0o444),
    hostile.Entry("file", "usr/bin/noexec-owner", b"#!\n", mode=0o455),
    hostile.Entry(
        "hardlink", "usr/lib/libwolfssl.so.5", link="usr/lib/libwolfssl.so.5.9.2", mode=0o4775
    ),  # a hard link entry carries its file's mode
)
# Python's tarfile.data_filter, as documented: leading "/" stripped; setuid, setgid, sticky and
# group/other write cleared; owner read+write set; execute cleared where the owner lacks it
WANT = {
    "etc/ssl/openssl.cnf": (0o644, b"[ req ]\n"),
    "etc/ro": (0o644, b"ro\n"),
    "usr/bin/noexec-owner": (0o644, b"#!\n"),
    "usr/lib/libwolfssl.so": (0o777, "libwolfssl.so.5.9.2"),
    "usr/lib/libwolfssl.so.5.9.2": (0o755, b"\x7fELF" + bytes(range(256))),
    "usr/lib/libwolfssl.so.5": (0o755, b"\x7fELF" + bytes(range(256))),
}


def _tree(root: Path) -> dict[str, tuple[int, bytes | str]]:
    out: dict[str, tuple[int, bytes | str]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_dir() and not p.is_symlink():
            continue
        st = p.lstat()
        body = os.readlink(p) if p.is_symlink() else p.read_bytes()
        out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), body)
    return out


@pytest.mark.parametrize("filters", ["as this Python has them", "removed (as on 3.11.2)"])
def test_good_archive_unpacks_as_the_data_filter_says(
    filters: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if filters.startswith("removed"):
        for name in ("data_filter", "tar_filter", "fully_trusted_filter"):
            monkeypatch.delattr(tarfile, name, raising=False)
    src = tmp_path / "p.tar.gz"
    src.write_bytes(hostile.compress(hostile.tar_bytes(GOOD), "gz"))
    archive.extract(src, tmp_path / "ours", archive.PACKAGE)
    assert _tree(tmp_path / "ours") == WANT
    if hasattr(tarfile, "data_filter"):  # Python's own filter gives the same tree
        with tarfile.open(src) as tar:
            tar.extractall(tmp_path / "python", filter="data")
        assert _tree(tmp_path / "python") == WANT


# --- bounded: limits, bombs, memory --------------------------------------------------------


def test_limits_on_bytes_and_members(tmp_path: Path) -> None:
    big = tuple(hostile.Entry("file", f"f{i}", os.urandom(300_000)) for i in range(4))
    src = tmp_path / "big.tar.gz"
    src.write_bytes(hostile.compress(hostile.tar_bytes(big), "gz"))
    with pytest.raises(archive.ArchiveError, match=r"unpacks to more than 1,048,576 bytes"):
        archive.extract(src, tmp_path / "r1", archive.Limits(total=1 << 20, members=10, ratio=100))
    with pytest.raises(archive.ArchiveError, match=r"more than 3 members"):
        archive.extract(src, tmp_path / "r2", archive.Limits(total=1 << 30, members=3, ratio=100))
    archive.extract(src, tmp_path / "r3", archive.Limits(total=1 << 30, members=4, ratio=100))
    assert (tmp_path / "r3/f3").read_bytes() == big[3].body


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from openwrt_wolf.files import archive
    from openwrt_wolf.whatif import pkgsource
    path, how = Path(sys.argv[1]), sys.argv[2]
    try:
        if how == "extract":
            archive.extract(path, Path(sys.argv[3]), archive.PACKAGE, what="package")
        elif how == "list":
            pkgsource._members(path)
    except archive.ArchiveError as e:
        print(e)
        sys.exit(2)
""")


def _child_rss(tmp: Path, *args: str) -> tuple[int, str, int]:
    """Exit status, stdout and peak RSS (KiB, tests/peak.py) of CHILD."""
    rc, out, _err, rss = peak.run([sys.executable, "-c", CHILD, *args], tmp, 120, cwd=ROOT)
    return rc, out, rss


@pytest.mark.parametrize("how", ["extract", "list"])
def test_a_gigabyte_bomb_is_refused_in_bounded_memory(how: str, tmp_path: Path) -> None:
    """1 GiB of zeros in one member of an 1 MiB gzip package: read whole (as before) it would
    take a GiB of memory; streamed it is refused after 64 MiB with the memory of an import."""
    case = hostile.Case("bomb", "gz", (), "refused", codec="gz", bomb=(1 << 30, 1 << 20))
    bomb = hostile.write(case, tmp_path / "bomb.apk")
    assert bomb.stat().st_size < 2 << 20
    rc, out, rss = _child_rss(tmp_path, str(bomb), how, str(tmp_path / "root"))
    _, _, baseline = _child_rss(tmp_path, str(tmp_path / "none"), "nothing")
    print(f"bomb ({how}): peak RSS {rss >> 10} MiB; the same child doing nothing: "
          f"{baseline >> 10} MiB")  # fmt: skip
    assert rc == 2 and "decompression bomb" in out, out
    assert rss < baseline + (64 << 10), (rss, baseline)  # KiB: within 64 MiB of nothing


@pytest.mark.parametrize("style", tree_bombs.SPARSE)
def test_a_sparse_tib_is_refused_at_its_header(style: str, tmp_path: Path, no_hang: None) -> None:
    """A sparse file of a TiB in a ~200-byte archive (tarfile reads its holes as zeros, which
    the stream's bound never counts): refused before its data is read. Listed, not
    extracted: the code before this wrote the zeros to disk."""
    bomb = tree_bombs.sparse_bomb(tmp_path / "bomb.tar.gz", style)
    with pytest.raises(archive.ArchiveError, match=r"sparse file .*big declares 1,099,511,62"):
        for _m, data in archive.members(bomb, archive.PACKAGE, what="package"):
            for _ in data:
                pass


# --- the archive file itself ---------------------------------------------------------------


def _special(kind: str, tmp_path: Path) -> Path:
    p = tmp_path / f"pkg-{kind}.apk"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        p.symlink_to("/dev/zero")
    elif kind == "dir":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "random":
        p.write_bytes(os.urandom(100_000))
    elif kind == "truncated":
        p.write_bytes(hostile.compress(hostile.tar_bytes(GOOD), "gz")[:200])
    elif kind == "apk-v3":
        p.write_bytes(b"ADBd" + bytes(1000))
    return p


@pytest.mark.parametrize(
    "kind", ["fifo", "dev-zero", "dir", "empty", "random", "truncated", "apk-v3", "missing"]
)
def test_an_archive_that_is_not_one_is_one_line(kind: str, tmp_path: Path, no_hang: None) -> None:
    src = _special(kind, tmp_path)
    for run in (
        lambda: archive.extract(src, tmp_path / "root", archive.PACKAGE, what="package"),
        lambda: list(archive.members(src, archive.PACKAGE, what="package")),
    ):
        with pytest.raises(WolfError) as e:
            run()
        assert str(src) in str(e.value) and "\n" not in str(e.value)
    assert not any((tmp_path / "root").rglob("*")) if (tmp_path / "root").exists() else True


# --- locate: paths resolved as a process chrooted at the root resolves them -----------------


def test_locate_follows_links_inside_the_root_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr/lib").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")  # inside
    (root / "abs").symlink_to("/usr")  # absolute: the root's /usr
    (root / "up").symlink_to("../../../..")  # climbs: stops at the root
    (root / "etc").mkdir()
    (root / "hostetc").symlink_to("/etc")  # the host's /etc by host rules; the root's here
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    assert archive.locate(root, "lib/x") == root / "usr/lib/x"
    assert archive.locate(root, "/abs/lib/x") == root / "usr/lib/x"
    assert archive.locate(root, "up/up/usr/x") == root / "usr/x"
    assert archive.locate(root, "hostetc/hostname") == root / "etc/hostname"
    assert archive.locate(root, "lib") == root / "lib"  # the last part is the entry itself
    assert archive.locate(root, "../../x") == root / "x"
    with pytest.raises(archive.ArchiveError, match="too many levels"):
        archive.locate(root, "loop1/x")


def test_names_in_error_lines_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """A member name with an OSC sequence (sets the terminal's title) and a newline: the one
    error line shows them escaped."""
    evil = "usr/\x1b]0;pwned\x07\nerror: fake/../../x"
    src = tmp_path / "p.tar.gz"
    src.write_bytes(hostile.compress(hostile.tar_bytes((hostile.Entry("file", evil, b"x"),)), "gz"))
    with pytest.raises(archive.ArchiveError) as e:
        archive.extract(src, tmp_path / "root", archive.PACKAGE, what="package")
    line = str(e.value)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert "\\x1b]0;pwned\\x07" in line


# --- an .ipk's data.tar.gz, and a tree another tool unpacked ---------------------------------


def _ipk(path: Path, data: bytes) -> Path:
    """An .ipk as OpenWrt's ipkg-build makes it: a tar.gz of debian-binary, control.tar.gz,
    data.tar.gz."""
    outer = (
        hostile.Entry("file", "./debian-binary", b"2.0\n"),
        hostile.Entry("file", "./control.tar.gz", hostile.compress(hostile.tar_bytes(()), "gz")),
        hostile.Entry("file", "./data.tar.gz", data),
    )
    path.write_bytes(hostile.compress(hostile.tar_bytes(outer), "gz"))
    return path


@pytest.mark.parametrize("label", ["dotdot/file-12", "hardlink/absolute-victim", "special/chr"])
def test_an_ipks_data_is_held_to_the_same_rules(label: str, tmp_path: Path) -> None:
    v = hostile.Victim(tmp_path)
    v.plant()
    case = _case(label, v.dir)
    ipk = _ipk(tmp_path / "p.ipk", hostile.compress(hostile.tar_bytes(case.entries), "gz"))
    with pytest.raises(archive.ArchiveError):
        archive.extract(ipk, tmp_path / "root", archive.PACKAGE, inner="data.tar.gz")
    assert v.changes() == []
    assert sorted(hostile.outside(tmp_path, [tmp_path / "root", v.dir])) == ["p.ipk"]


def test_an_ipk_bomb_stops_early_and_a_good_one_unpacks(tmp_path: Path) -> None:
    bomb = hostile.write(
        hostile.Case("bomb", "gz", (), "refused", codec="gz", bomb=(1 << 30, 1 << 20)),
        tmp_path / "data.tar.gz",
    )
    ipk = _ipk(tmp_path / "bomb.ipk", bomb.read_bytes())
    with pytest.raises(archive.ArchiveError, match="decompression bomb"):
        list(archive.members(ipk, archive.PACKAGE, inner="data.tar.gz"))
    good = _ipk(tmp_path / "good.ipk", hostile.compress(hostile.tar_bytes(GOOD), "gz"))
    archive.extract(good, tmp_path / "root", archive.PACKAGE, inner="data.tar.gz")
    assert _tree(tmp_path / "root") == WANT
    with pytest.raises(archive.ArchiveError, match=r"no other in it"):
        archive.extract(tmp_path / "bomb.ipk", tmp_path / "r2", archive.PACKAGE, inner="other")


def test_a_tree_another_tool_unpacked_goes_in_by_the_same_rules(tmp_path: Path) -> None:
    """archive.place_tree (what apk extract wrote): a link that climbs out and a FIFO are
    refused; a good tree lands inside a root whose own link points at the victim."""
    v = hostile.Victim(tmp_path)
    v.plant()
    for bad in ("link", "fifo"):
        src = tmp_path / f"src-{bad}"
        (src / "usr").mkdir(parents=True)
        if bad == "link":
            (src / "usr" / "lib").symlink_to("../" * 12 + str(v.dir).lstrip("/"))
        else:
            os.mkfifo(src / "usr" / "fifo")
        with pytest.raises(archive.ArchiveError):
            archive.place_tree(src, tmp_path / "root", archive.PACKAGE, what="apk's tree")
    good = tmp_path / "src-good"
    (good / "usr" / "lib").mkdir(parents=True)
    (good / "usr" / "lib" / "f").write_bytes(b"EVIL\n")
    root = tmp_path / "root2"
    root.mkdir()
    (root / "usr").symlink_to(v.dir)  # the image's /usr is a link to the victim (absolute)
    archive.place_tree(good, root, archive.PACKAGE, what="apk's tree")
    assert v.changes() == []
    # inside the root the link led nowhere (no such directory there): a directory replaced it
    assert (root / "usr" / "lib" / "f").read_bytes() == b"EVIL\n"
    assert not (root / "usr").is_symlink()
