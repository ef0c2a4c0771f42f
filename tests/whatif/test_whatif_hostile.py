"""what-if with hostile packages, special files and output targets, run as a user runs it on
the stand-in ImageBuilder's builds (tests/whatif/test_whatif.py's lab). The oracles: a
victim directory (its files' bytes, modes and existence), the file type of each target
before and after, the bytes a FIFO's reader got (a squashfs of the reported size), the peak
RSS of the run (tests/peak.py), /proc and the cache's run directories."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from openwrt_wolf import paths
from openwrt_wolf.whatif import pkgsource
from tests import hostile_archives as hostile
from tests import peak
from tests.conftest import unavailable
from tests.standin.kit import Kit
from tests.whatif.test_whatif import V1, Built

ROOT = Path(__file__).resolve().parents[2]
# mbedtls -> wolfssl: libustream-mbedtls leaves the image, libustream-wolfssl comes in
REMOVED, ADDED = "libustream-mbedtls", "libustream-wolfssl"


def _cache(tmp: Path) -> Path:
    """A cache of its own (to see its run directories) sharing OpenWrt's tools and their
    sources, made once."""
    cache = tmp / "cache"
    cache.mkdir(exist_ok=True)
    for shared in ("openwrt-tools", "upstream"):
        if not (cache / shared).is_symlink() and not (cache / shared).exists():
            (cache / shared).symlink_to(paths.cache_dir() / shared)
    return cache


def whatif(tmp: Path, *args: str, timeout: float = 300) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of one what-if run (its process group killed if it
    outlives ``timeout``)."""
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(_cache(tmp))}
    p = subprocess.Popen(
        [sys.executable, "-m", "invoke", "what-if", *args, "--store", str(tmp / "store")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out, err


def whatif_rss(tmp: Path, *args: str) -> tuple[int, str, int]:
    """Exit status, stderr and peak RSS (KiB, the run and the tools it waited for; tests/peak.py
    counts it)."""
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(_cache(tmp))}
    rc, _out, err, rss = peak.run(
        [sys.executable, "-m", "invoke", "what-if", *args, "--store", str(tmp / "store")],
        tmp, 300, cwd=ROOT, env=env,
    )  # fmt: skip
    return rc, err, rss


def one_error(rc: int, err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 2 and "Traceback" not in err, err[-3000:]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def tar_packages(
    lab: dict[tuple[str, str], Built], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The build's packages as an index.json directory of tar.gz files (what-if's third
    format, the one a crafted archive replaces here; hostile_archives.tar_index)."""
    return hostile.tar_index(lab[(V1, "mbedtls")].packages, tmp_path_factory.mktemp("tar") / "pk")


def packages_with(tar_pk: Path, tmp: Path, name: str, case: hostile.Case | None) -> Path:
    """A copy of the tar packages with ``name``'s archive replaced by the case's."""
    pk = tmp / "pk"
    if not pk.exists():
        shutil.copytree(tar_pk, pk)
    pkg = pkgsource.load(pk).get(name)  # by its plain name: libustream-mbedtls provides it
    assert pkg is not None
    if case is not None:
        hostile.write(case, pkg.file)
    return pk


def adb_packages_with(src: Built, name: str, make: Callable[[pkgsource.Package], None]) -> Path:
    """A copy of the build's ADB packages beside packages/ (so the ImageBuilder's own apk
    reads it, as what-if finds it) with ``name``'s .apk made anew by ``make``."""
    pk = src.packages.parent / f"packages-hostile-{os.getpid()}-{time.monotonic_ns()}"
    shutil.copytree(src.packages, pk)
    pkg = pkgsource.load(pk).get(name)
    assert pkg is not None and pkg.format == "adb"
    pkg.file.unlink()
    make(pkg)
    return pk


# a few of each family, aimed at the removed package (its file list is what is deleted) and
# at the added one (what is unpacked)
PICKS = ["dotdot/file-12", "dotdot/file-3", "symlink-out/rel-5", "symlink-out/via-link-2",
         "symlink-chain/up-2", "hardlink/absolute-victim", "hardlink/etc-hostname",
         "hardlink/rel-8", "special/chr", "special/fifo"]  # fmt: skip


@pytest.mark.parametrize("package", [REMOVED, ADDED])
@pytest.mark.parametrize("label", PICKS)
def test_a_hostile_package_reaches_nothing_outside(
    lab: dict[tuple[str, str], Built], tar_packages: Path, tmp_path: Path, label: str,
    package: str,
) -> None:  # fmt: skip
    v = hostile.Victim(tmp_path / "v")
    v.plant()
    case = next(c for c in hostile.cases(v.dir) if c.label == label)
    src = lab[(V1, "mbedtls")]
    pk = packages_with(tar_packages, tmp_path, package, case)
    out = tmp_path / "out.squashfs"
    rc, _, err = whatif(tmp_path, "--from", str(src.bin_dir), "--flavour", "wolfssl",
                           "--packages", str(pk), "--output", str(out))  # fmt: skip
    if package == ADDED:  # every pick is refused when unpacked
        assert "package" in one_error(rc, err)
        assert not out.exists()
    else:  # its files are only listed and removed inside the image: that may succeed
        assert rc in (0, 2) and "Traceback" not in err, err[-3000:]
    assert v.changes() == []
    assert list((tmp_path / "cache" / "what-if").glob("run-*")) == []


def test_a_bomb_package_is_refused_in_bounded_memory(
    lab: dict[tuple[str, str], Built], tar_packages: Path, tmp_path: Path
) -> None:
    """1 GiB of zeros in libustream-wolfssl (an 1 MiB file), through --image: refused, and
    the run's peak memory is that of a normal what-if run, not a GiB."""
    src = lab[(V1, "mbedtls")]
    img = src.image("sysupgrade")
    assert img is not None
    normal = tmp_path / "normal"
    normal.mkdir()
    pk = packages_with(tar_packages, normal, ADDED, None)
    args = ["--image", str(img), "--flavour", "wolfssl"]
    rc, err, base = whatif_rss(normal, *args, "--packages", str(pk))
    assert rc == 0, err[-2000:]
    bomb = hostile.Case("bomb", "gz", (), "refused", codec="gz", bomb=(1 << 30, 1 << 20))
    pk = packages_with(tar_packages, tmp_path, ADDED, bomb)
    rc, err, rss = whatif_rss(tmp_path, *args, "--packages", str(pk))
    print(f"what-if with a 1 GiB bomb: peak RSS {rss >> 10} MiB; a normal run {base >> 10} MiB")
    assert "decompression bomb" in one_error(rc, err)
    assert rss < base + (64 << 10)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_special_file_as_a_package_is_one_line(
    lab: dict[tuple[str, str], Built], tmp_path: Path, kind: str
) -> None:
    """In the ImageBuilder's own format (APK v3): apk is never handed a FIFO or a device."""
    src = lab[(V1, "mbedtls")]

    def make(pkg: pkgsource.Package) -> None:
        if kind == "fifo":
            os.mkfifo(pkg.file)
        else:
            pkg.file.symlink_to("/dev/zero")

    pk = adb_packages_with(src, ADDED, make)
    try:
        rc, _, err = whatif(tmp_path, "--from", str(src.bin_dir), "--flavour", "wolfssl",
                            "--packages", str(pk), timeout=120)  # fmt: skip
    finally:
        shutil.rmtree(pk)
    line = one_error(rc, err)
    assert ("FIFO" in line) if kind == "fifo" else ("character device" in line)


def test_an_apk_package_with_a_link_out_is_refused(
    lab: dict[tuple[str, str], Built], standin_kit: Kit, tmp_path: Path
) -> None:
    """An APK v3 package (made by apk mkpkg) holding a symlink that climbs out of the root and
    a file: apk extracts it into an empty directory, archive.place_tree refuses the link;
    the victim directory stays as it was."""
    v = hostile.Victim(tmp_path / "v")
    v.plant()
    files = tmp_path / "files"
    (files / "usr" / "lib").mkdir(parents=True)
    (files / "usr" / "lib" / "libx.so").write_bytes(b"EVIL\n")
    (files / "usr" / "lib" / "victim").symlink_to("../" * 12 + str(v.dir).lstrip("/"))
    src = lab[(V1, "mbedtls")]

    def make(pkg: pkgsource.Package) -> None:
        subprocess.run([str(standin_kit.apk), "mkpkg", "--info", f"name:{pkg.name}",
                        "--info", f"version:{pkg.version}", "--files", str(files),
                        "--output", str(pkg.file)],
                       check=True, capture_output=True, timeout=120)  # fmt: skip

    pk = adb_packages_with(src, ADDED, make)
    try:
        rc, _, err = whatif(tmp_path, "--from", str(src.bin_dir), "--flavour", "wolfssl",
                            "--packages", str(pk))  # fmt: skip
    finally:
        shutil.rmtree(pk)
    assert "leads out of the tree" in one_error(rc, err)
    assert v.changes() == []


def test_a_fifo_as_the_manifest_is_one_line(
    lab: dict[tuple[str, str], Built], tmp_path: Path
) -> None:
    src = lab[(V1, "mbedtls")]
    d = tmp_path / "bin"
    shutil.copytree(src.bin_dir, d)
    manifest = next(d.glob("*.manifest"))
    manifest.unlink()
    os.mkfifo(manifest)
    rc, _, err = whatif(tmp_path, "--from", str(d), "--flavour", "wolfssl", "--packages",
                           str(src.packages), timeout=120)  # fmt: skip
    assert "manifest" in one_error(rc, err) and "FIFO" in err


# --- --output ------------------------------------------------------------------------------


def _kind(path: Path) -> str:
    return stat.filemode(path.lstat().st_mode)[0]


def test_output_targets(lab: dict[tuple[str, str], Built], tmp_path: Path) -> None:
    """A link planted at the old temporary name, the build's own files, a FIFO with a
    reader, a character device: nothing outside is touched, nothing read is overwritten, a
    device or FIFO is written into and stays what it is."""
    src = lab[(V1, "mbedtls")]
    v = hostile.Victim(tmp_path / "v")
    v.plant()
    d = tmp_path / "bin"
    shutil.copytree(src.bin_dir, d)
    base = ["--from", str(d), "--flavour", "wolfssl", "--packages", str(src.packages)]
    out = tmp_path / "out" / "root.squashfs"
    out.parent.mkdir()
    (out.parent / f".{out.name}.tmp").symlink_to(v.dir / "f")  # the name the old code used
    rc, stdout, err = whatif(tmp_path, *base, "--output", str(out), "--json")
    assert rc == 0, err[-2000:]
    size = json.loads(stdout)["what_if"]["rootfs_to"]
    assert out.stat().st_size == size and out.read_bytes()[:4] == b"hsqs"
    assert v.changes() == []
    # the build's own files (the image, the manifest) are not overwritten
    for own in sorted(d.iterdir())[:3]:
        before = own.read_bytes()
        rc, _, err = whatif(tmp_path, *base, "--output", str(own))
        assert "a file this run reads" in one_error(rc, err)
        assert own.read_bytes() == before
    # a FIFO with a reader gets the squashfs; one without is one line at once
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    rc, _, err = whatif(tmp_path, *base, "--output", str(fifo))
    reader.join(60)
    assert rc == 0, err[-2000:]
    assert _kind(fifo) == "p" and len(got[0]) == size and got[0][:4] == b"hsqs"
    t0 = time.monotonic()
    rc, _, err = whatif(tmp_path, *base, "--output", str(fifo))
    assert "no process reads" in one_error(rc, err) and time.monotonic() - t0 < 60
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        unavailable("making a device node needs root (CAP_MKNOD)")
    rc, _, err = whatif(tmp_path, *base, "--output", str(null))
    assert rc == 0 and _kind(null) == "c", err[-2000:]


def test_a_killed_runs_directory_is_removed_by_the_next_run(
    lab: dict[tuple[str, str], Built], tmp_path: Path
) -> None:
    src = lab[(V1, "mbedtls")]
    base = ["--from", str(src.bin_dir), "--flavour", "wolfssl", "--packages", str(src.packages)]
    runs = _cache(tmp_path) / "what-if"
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(_cache(tmp_path))}
    p = subprocess.Popen(
        [sys.executable, "-m", "invoke", "what-if", *base, "--store", str(tmp_path / "store")],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(runs.glob("run-*/root")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(30)
    left = list(runs.glob("run-*"))
    assert len(left) == 1 and not Path(f"/proc/{p.pid}").exists()
    rc, _, err = whatif(tmp_path, *base)
    assert rc == 0, err[-2000:]
    assert list(runs.glob("run-*")) == []


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[{"name": "a", "depends": [], "file": "a.apk", "size": NaN}]', "[0].size"),
        ('[{"name": "a", "depends": [], "file": "a.apk", "size": 1e999}]', "[0].size"),
        ('[{"name": "a", "depends": [], "file": "a.apk", "size": ' + "9" * 5000 + "}]", "[0].size"),
    ],
    ids=["nan", "infinity", "5000-digit"],
)
def test_an_index_json_number_we_must_not_carry_is_one_line(
    tmp_path: Path, text: str, field: str
) -> None:
    """index.json is read as any untrusted JSON: NaN, Infinity and integers Python refuses to
    print are refused with the file and the field named (before: a bare ValueError)."""
    (tmp_path / "index.json").write_text(text)
    with pytest.raises(pkgsource.WolfError) as e:
        pkgsource.load(tmp_path)
    assert str(tmp_path / "index.json") in str(e.value)
    assert field in str(e.value)
