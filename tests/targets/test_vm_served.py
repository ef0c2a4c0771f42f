"""The guest's package server (targets/vm/machine.py served): a directory of the files it
serves, or one above it, renamed and replaced by a link to another directory after the server
started (the files were listed) serves nothing from that other directory. Before, O_NOFOLLOW
guarded only the last component: the link's target's file of the same name was served.

Oracle: a victim directory beside it holding a file of the same name, fetched over real HTTP
on 127.0.0.1 (urllib)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from openwrt_wolf.targets.vm.machine import served

NAME = "wpad-basic-wolfssl-1-r1.apk"
SECRET = b"the victim's bytes, never for the guest"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


@pytest.mark.parametrize("swap", ["directory", "parent"])
def test_a_directory_swapped_for_a_link_serves_nothing_from_its_target(
    tmp_path: Path, swap: str
) -> None:
    pkgs = tmp_path / "bin" / "packages"
    pkgs.mkdir(parents=True)
    (pkgs / NAME).write_bytes(b"our package")
    victim = tmp_path / "victim"
    (victim / "packages").mkdir(parents=True)
    (victim / NAME).write_bytes(SECRET)
    (victim / "packages" / NAME).write_bytes(SECRET)
    with served({NAME: pkgs / NAME}, "t0k") as port:
        url = f"http://127.0.0.1:{port}/t0k/{NAME}"
        assert _get(url) == (200, b"our package")
        moved = pkgs if swap == "directory" else pkgs.parent
        moved.rename(moved.with_name(moved.name + ".old"))
        moved.symlink_to(victim, target_is_directory=True)
        assert (pkgs / NAME).read_bytes() == SECRET  # the path now leads to the victim
        status, body = _get(url)
    assert SECRET not in body
    assert (status, body) in ((200, b"our package"), (404, b""))


def test_a_directory_swapped_between_listing_and_serving_is_refused(tmp_path: Path) -> None:
    """perf/wifi_image.py lists --packages, boots the VM, then serves: a swap in that gap (the
    directory replaced by a link to another) was served from the link's target. The package
    listing's (st_dev, st_ino) is what the server checks when it starts."""
    from openwrt_wolf.errors import WolfError
    from openwrt_wolf.perf import wifi_image

    pkgs = tmp_path / "bin" / "packages"
    pkgs.mkdir(parents=True)
    (pkgs / "packages.adb").write_bytes(b"index")
    (pkgs / NAME).write_bytes(b"our package")
    rp = wifi_image.repo(pkgs, "wolfssl")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / NAME).write_bytes(SECRET)
    (victim / "packages.adb").write_bytes(SECRET)
    pkgs.rename(pkgs.with_name("packages.old"))
    pkgs.symlink_to(victim, target_is_directory=True)
    refused = pytest.raises(WolfError, match="changed since its files were listed")
    with refused, served(rp.files, "t0k", listed={rp.root: rp.ident}):
        pass
