"""The default wolfSSL build is the patch set's image (build/basefeed.py, build/sdk.py): what
it is refused before any compile, each in one error line and exit 2, through `invoke build`
on the stand-in mirror (an SDK assembled as OpenWrt's target/sdk/Makefile assembles one).
The oracle for "before any compile": the SDK's step lines never name `make package/`, and
the store holds no record."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import private_copy
from tests.standin.sources_kit import SOURCES_ALLOW, source_dirs

ROOT = Path(__file__).resolve().parents[2]
V1 = "tplink_tl-wr902ac-v1"
SDK = "openwrt-sdk-25.12.5-ath79-generic_gcc-14.3.0_musl.Linux-x86_64"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory, standin_mirror: Path) -> Path:
    return private_copy(standin_mirror, tmp_path_factory.mktemp("mirror"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "cache"),
            "OPENWRT_WOLF_STORE": str(tmp_path / "store")}  # fmt: skip


def refused(env: dict[str, str], *args: str) -> str:
    """The one error line of `invoke build ARGS`, after checking nothing was compiled."""
    p = subprocess.run([sys.executable, "-m", "invoke", "build", "--device", V1, *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "make package/" not in p.stderr, p.stderr[-3000:]
    assert not list(Path(env["OPENWRT_WOLF_STORE"]).rglob("*.json"))
    return lines[0]


def sdk_copy(mirror: Path, dest: Path) -> Path:
    """An unpacked SDK of the mirror's (as `--sdk PATH` takes one)."""
    shutil.copytree(mirror / ".trees" / SDK, dest, symlinks=True)
    return dest


def test_sdk_and_imagebuilder_of_another_release(
    mirror: Path, env: dict[str, str], openwrt_tree_24108: Path, tmp_path: Path
) -> None:
    other = tmp_path / "sdk-24.10.8"
    (other / "include").mkdir(parents=True)
    shutil.copy2(openwrt_tree_24108 / "include/version.mk", other / "include/version.mk")
    for f in ("Makefile", "scripts/feeds"):  # what tells an SDK directory (build/sdk.py SDK)
        (other / f).parent.mkdir(parents=True, exist_ok=True)
        (other / f).write_text("")
    line = refused(env, "--flavour", "wolfssl", "--mirror", str(mirror), "--sdk", str(other))
    assert f"--sdk {other} is OpenWrt 24.10.8, the request is 25.12.5" in line
    assert "--release 24.10.8" in line
    line = refused(env, "--flavour", "wolfssl", "--imagebuilder", str(other), "--sdk",
                   str(sdk_copy(mirror, tmp_path / "sdk")))  # fmt: skip
    assert f"--imagebuilder {other} is OpenWrt 24.10.8, the request is 25.12.5" in line


def test_tree_of_another_release(
    mirror: Path, env: dict[str, str], openwrt_tree_24108: Path
) -> None:
    line = refused(env, "--flavour", "wolfssl", "--mirror", str(mirror), "--backend", "sdk",
                   "--tree", str(openwrt_tree_24108))  # fmt: skip
    assert "is OpenWrt 24.10.8, the request is 25.12.5" in line and "--tree" in line


def _series_without(patches: Path, dest: Path, name: str) -> Path:
    shutil.copytree(patches, dest)
    series = dest / "series"
    series.write_text("".join(ln for ln in series.read_text().splitlines(keepends=True)
                              if ln.strip() != name))  # fmt: skip
    (dest / name).unlink()
    return dest


def test_tree_patched_with_another_series(
    mirror: Path, env: dict[str, str], openwrt_tree_25125: Path, tmp_path: Path
) -> None:
    """A tree patched with another version of the series (its stamp names other patches) is
    refused, not patched again or used; the tree is left as it was."""
    tree = tmp_path / "openwrt"
    shutil.copytree(openwrt_tree_25125, tree, symlinks=True)
    other = tmp_path / "patches"
    shutil.copytree(ROOT / "patches", other)
    p4 = other / "0004-apk-add-wolfssl-variant.patch"
    p4.write_text("An earlier version of this patch.\n\n" + p4.read_text())
    p = subprocess.run([sys.executable, "-m", "invoke", "patch", "--tree", str(tree),
                        "--patches", str(other)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    stamp = (tree / ".wolf-patches.json").read_bytes()
    line = refused(env, "--flavour", "wolfssl", "--mirror", str(mirror), "--backend", "sdk",
                   "--tree", str(tree))  # fmt: skip
    assert "is patched with another version of the USE_WOLFSSL series" in line
    assert "patch --revert" in line
    assert (tree / ".wolf-patches.json").read_bytes() == stamp


def test_sdk_that_drops_the_minimal_build(
    mirror: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A patch set whose wolfssl package has no minimal build (0003 left out): the SDK's make
    defconfig cannot keep the symbols that make the patch set's libwolfssl, and the build
    stops there rather than take OpenWrt's full library."""
    patches = _series_without(ROOT / "patches", tmp_path / "patches",
                              "0003-wolfssl-add-minimal-build-and-ECC-choice.patch")  # fmt: skip
    line = refused(env, "--flavour", "wolfssl", "--mirror", str(mirror), "--patches",
                   str(patches))  # fmt: skip
    assert "the SDK's make defconfig did not keep" in line and "WOLFSSL_MINIMAL" in line


def test_stale_package_in_the_sdk(mirror: Path, env: dict[str, str], tmp_path: Path) -> None:
    """A libwolfssl package in the SDK's bin/packages that no run of ours made (another
    compile, another tool) is never taken for the patch set's."""
    sdk = sdk_copy(mirror, tmp_path / "sdk")
    stale = sdk / "bin/packages/mips_24kc/base/libwolfssl5.9.1.deadbeef-5.9.1-r1.apk"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"not ours")
    line = refused(env, "--flavour", "wolfssl", "--mirror", str(mirror), "--sdk", str(sdk))
    assert "bin/packages holds mips_24kc/base/libwolfssl5.9.1.deadbeef-5.9.1-r1.apk" in line
    assert "which no openwrt-wolf run made" in line
    assert stale.read_bytes() == b"not ours"


def test_packages_a_failed_run_of_ours_left_are_taken_back(
    mirror: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A run that stopped after its make wrote a package (a later compile failed, a kill)
    has not marked the file yet: the package was pending. The next run removes that file as
    its own and builds, where it used to refuse it as a stranger's (the main job for ath79
    after a failed SDK step)."""
    sdk = sdk_copy(mirror, tmp_path / "sdk")
    left = sdk / "bin/packages/mips_24kc/base/libwolfssl5.9.1.deadbeef-5.9.1-r1.apk"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"the failed run's")
    # what a run writes before its first compile (build/sdk.py _clear_stale)
    (left.parents[2] / ".openwrt-wolf-built-pending").write_text("base\tlibwolfssl\n")
    srcs = ",".join(str(d) for d in source_dirs(tmp_path / "sources"))  # no OpenWrt mirrors
    argv = ["build", "--device", V1, "--flavour", "wolfssl", "--mirror", str(mirror), "--sdk",
            str(sdk), "--packages=-apk-mbedtls,-wpad-basic-mbedtls", "--sources", srcs,
            f"--allow={','.join(SOURCES_ALLOW)}"]  # fmt: skip
    p = subprocess.run([sys.executable, "-m", "invoke", *argv], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert not left.exists()
    built = sorted(left.parent.glob("libwolfssl*.apk"))
    assert len(built) == 1 and built[0].read_bytes()[:3] == b"ADB", built
    assert not (left.parents[2] / ".openwrt-wolf-built-pending").exists()


def test_offline_sdk_names_the_ways_out(env: dict[str, str]) -> Any:
    """No mirror and no server: the patch set's image needs an SDK, and the line says how to
    give one or to build the stock image instead."""
    line = refused(env, "--flavour", "wolfssl", "--mirror", "http://127.0.0.1:9")
    assert "unreachable" in line and "--sdk PATH" in line and "--stock" in line
