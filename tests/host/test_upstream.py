"""Upstream snapshots: found, checked by sha256, extracted once (also by two processes at once)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.host import upstream
from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private shared folder holding the real fwtool snapshot, and a private cache."""
    try:
        real = upstream.tarball("fwtool")
    except WolfError as e:
        unavailable(str(e))
    d = tmp_path / "shared"
    (d / "openwrt").mkdir(parents=True)
    shutil.copy(real, d / "openwrt" / real.name)
    monkeypatch.setenv(upstream.SHARED_ENV, str(d))
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    return d / "openwrt"


def test_extracts_exactly_the_tarball(shared: Path) -> None:
    top = upstream.source_dir("fwtool")
    listing = subprocess.run(
        ["tar", "-tzf", str(shared / upstream.snapshot("fwtool").file)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    want = {p.rstrip("/").split("/", 1)[1] for p in listing if "/" in p.rstrip("/")}
    got = {str(p.relative_to(top)) for p in top.rglob("*")} - {upstream.STAMP}
    assert top.name == "fwtool" and got == want and (top / "fwtool.c").is_file()


def test_tampered_tarball_is_refused(shared: Path) -> None:
    f = shared / upstream.snapshot("fwtool").file
    data = bytearray(f.read_bytes())
    data[-100] ^= 0xFF
    f.chmod(0o644)
    f.write_bytes(bytes(data))
    with pytest.raises(WolfError, match=r"sha256 .* is not the recorded"):
        upstream.source_dir("fwtool")


def test_missing_snapshot_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(upstream.SHARED_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv("OPENWRT_TREE", raising=False)
    monkeypatch.delenv("OPENWRT_TREE_25_12_5", raising=False)
    with pytest.raises(WolfError, match="OPENWRT_WOLF_SHARED"):
        upstream.tarball("uhttpd")
    with pytest.raises(WolfError, match=r"\$OPENWRT_TREE"):
        upstream.openwrt_tree("25.12.5")


def test_two_processes_extract_once(shared: Path) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from openwrt_wolf.host import upstream; print(upstream.source_dir('fwtool'))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] and (Path(outs[0]) / "fwtool.c").is_file()
    leftovers = [p.name for p in Path(outs[0]).parent.iterdir() if p.name.startswith(".fwtool")]
    assert leftovers == []
