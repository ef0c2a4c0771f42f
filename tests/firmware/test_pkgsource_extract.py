"""Package extraction on a Python without tar extraction filters (Debian 12's 3.11.2): the
fallback must write what Python's own "tar" filter writes, and refuse what it refuses."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from openwrt_wolf.firmware import pkgsource


def _tar(path: Path, members: list[tuple[str, bytes | str, int]]) -> None:
    """(name, bytes for a file or a link target for a symlink, mode)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, body, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if isinstance(body, str):
                info.type, info.linkname = tarfile.SYMTYPE, body
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))


def _tree(root: Path) -> dict[str, tuple[int, bytes | str]]:
    out: dict[str, tuple[int, bytes | str]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        body: bytes | str = os.readlink(p) if p.is_symlink() else (
            p.read_bytes() if p.is_file() else b"")  # fmt: skip
        out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), body)
    return out


def _extract(archive: Path, root: Path) -> None:
    with tarfile.open(archive) as tar:
        pkgsource._extract_within(tar, tar.getmembers(), root)


GOOD: list[tuple[str, bytes | str, int]] = [
    ("./usr/lib/libwolfssl.so.5.9.2", b"\x7fELF" + bytes(range(256)), 0o4775),
    ("usr/lib/libwolfssl.so", "libwolfssl.so.5.9.2", 0o777),
    ("/etc/ssl/openssl.cnf", b"[ req ]\n", 0o666),
]


# what the "tar" filter makes of GOOD (Python's docs for tarfile.tar_filter): leading "/"
# stripped; setuid/setgid/sticky and group/other write bits cleared; links kept as they are
WANT = {
    "etc": None,
    "etc/ssl": None,
    "etc/ssl/openssl.cnf": (0o644, b"[ req ]\n"),
    "usr": None,
    "usr/lib": None,
    "usr/lib/libwolfssl.so": (0o777, "libwolfssl.so.5.9.2"),
    "usr/lib/libwolfssl.so.5.9.2": (0o755, b"\x7fELF" + bytes(range(256))),
}


@pytest.mark.parametrize("force_fallback", [False, True])
def test_extraction_writes_what_the_tar_filter_writes(
    force_fallback: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if force_fallback:
        monkeypatch.delattr(tarfile, "tar_filter", raising=False)
    archive = tmp_path / "p.tar.gz"
    _tar(archive, GOOD)
    _extract(archive, tmp_path / "root")
    got = _tree(tmp_path / "root")
    assert {k: v for k, v in got.items() if WANT.get(k)} == {k: v for k, v in WANT.items() if v}
    assert set(got) == set(WANT)


@pytest.mark.parametrize(
    "bad",
    [
        [("../escape", b"x", 0o644)],
        [("usr/../../escape", b"x", 0o644)],
        # a link out of root, then a file written through it
        [("lib", "/tmp", 0o777), ("lib/escape", b"x", 0o644)],
    ],
)
@pytest.mark.parametrize("force_fallback", [False, True])
def test_nothing_is_written_outside_root(
    bad: list[tuple[str, bytes | str, int]], force_fallback: bool, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    if force_fallback:
        monkeypatch.delattr(tarfile, "tar_filter", raising=False)
    archive = tmp_path / "p.tar.gz"
    _tar(archive, bad)
    root = tmp_path / "a" / "root"
    root.mkdir(parents=True)
    with pytest.raises(tarfile.TarError):
        _extract(archive, root)
    assert not (tmp_path / "a" / "escape").exists() and not (tmp_path / "escape").exists()
    assert not Path("/tmp/escape").exists()
