"""What OpenWrt's prepare_rootfs does to a rootfs that what-if must do too, without running a
package's scripts: rc.common's enable/disable of each init script (oracle: the v25.12.5 tree's
own etc/rc.common run by bash with IPKG_INSTROOT, as include/rootfs.mk runs it), removing a
package's links and the directories it owned, and the touch to SOURCE_DATE_EPOCH (oracle:
`find -mindepth 1 -execdir touch -hcd`, the line of include/rootfs.mk)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from openwrt_wolf.whatif import pkgsource, swap
from tests.conftest import need_tools

BASE_FILES = "package/base-files/files"
# init scripts of the tree: START only (procd), START and STOP, and a name rc.common trims
SCRIPTS = {
    "uhttpd": "package/network/services/uhttpd/files/uhttpd.init",
    "log": "package/system/ubox/files/log.init",
    "dropbear": "package/network/services/dropbear/files/dropbear.init",
}


def _root(tree: Path, dest: Path) -> Path:
    """A rootfs with base-files' rc.common and the functions it sources."""
    for rel in ("etc/rc.common", "lib/functions.sh", "lib/functions/service.sh"):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / BASE_FILES / rel, dest / rel)
    (dest / "etc/rc.d").mkdir()
    return dest


def _package(tree: Path, tmp: Path, name: str, files: dict[str, Path | None]) -> pkgsource.Package:
    """A tar-format package (pkgsource's index.json kind): path -> the tree file, or None for
    a directory it owns."""
    out = tmp / f"{name}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for path, src in files.items():
            if src is None:
                info = tarfile.TarInfo(path.lstrip("/"))
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                tar.add(src, arcname=path.lstrip("/"))
    return pkgsource.Package(name=name, version="1", file=out)


def _links(root: Path) -> dict[str, str]:
    rcd = root / "etc/rc.d"
    return {p.name: os.readlink(p) for p in rcd.iterdir() if p.is_symlink()}


def test_enable_and_disable_as_rc_common_does(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    need_tools("bash")
    tree = openwrt_tree_25125
    ours, theirs = _root(tree, tmp_path / "ours"), _root(tree, tmp_path / "theirs")
    scripts = {f"/etc/init.d/{n}": tree / p for n, p in SCRIPTS.items()}
    pkg = _package(tree, tmp_path, "services", scripts)
    for root in (ours, theirs):
        pkgsource.extract(pkg, root)
    for name in SCRIPTS:
        subprocess.run(["bash", "./etc/rc.common", f"./etc/init.d/{name}", "enable"], cwd=theirs,
                       env={**os.environ, "IPKG_INSTROOT": str(theirs)}, check=True,
                       timeout=60)  # fmt: skip
    swap._enable(ours, pkg)
    assert _links(theirs)  # rc.common made links: the comparison is not of two empty sets
    assert _links(ours) == _links(theirs)
    for name in SCRIPTS:
        subprocess.run(["bash", "./etc/rc.common", f"./etc/init.d/{name}", "disable"], cwd=theirs,
                       env={**os.environ, "IPKG_INSTROOT": str(theirs)}, check=True,
                       timeout=60)  # fmt: skip
    swap._disable(ours, pkg)
    assert _links(ours) == _links(theirs) == {}


def test_removal_takes_links_and_owned_directories(
    openwrt_tree_25125: Path, tmp_path: Path
) -> None:
    """libmbedtls installs libmbedtls.so.21 as a link to libmbedtls.so.3.6.6; libopenssl owns
    an empty /usr/lib/engines-3: a swap that removes the package leaves neither behind, and
    keeps a directory another package still owns."""
    tree = openwrt_tree_25125
    lib = tmp_path / "libfoo.so.3.6.6"
    lib.write_bytes(b"\x7fELF" + bytes(100))
    gone = _package(tree, tmp_path, "gone", {"/usr/lib/engines-3": None, "/etc/ssl": None,
                                              "/usr/lib/libfoo.so.3.6.6": lib})  # fmt: skip
    link = tmp_path / "link.tar.gz"  # the link, as a tar member, beside the file
    with tarfile.open(gone.file, "r:gz") as src, tarfile.open(link, "w:gz") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
        info = tarfile.TarInfo("usr/lib/libfoo.so.21")
        info.type, info.linkname = tarfile.SYMTYPE, "libfoo.so.3.6.6"
        dst.addfile(info)
    gone = pkgsource.Package(name="gone", version="1", file=link)
    kept = _package(tree, tmp_path, "kept", {"/etc/ssl": None})
    root = tmp_path / "root"
    root.mkdir()
    for p in (gone, kept):
        pkgsource.extract(p, root)
    assert (root / "usr/lib/libfoo.so.21").is_symlink() and (root / "usr/lib/engines-3").is_dir()
    index = pkgsource.Index(tmp_path, {"gone": gone, "kept": kept})
    plan = swap.Swap(("gone",), (), ("gone",), ())
    swap.apply(root, plan, index, {"kept"})
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == ["etc", "etc/ssl"]


def test_touch_as_prepare_rootfs_does(tmp_path: Path) -> None:
    need_tools("find", "touch")
    trees = []
    for name in ("ours", "theirs"):
        r = tmp_path / name
        (r / "etc/init.d").mkdir(parents=True)
        (r / "etc/init.d/x").write_text("#!/bin/sh\n")
        (r / "etc/rc.d").mkdir()
        (r / "etc/rc.d/S10x").symlink_to("../init.d/x")
        (r / "etc/rc.d/K10dangling").symlink_to("../init.d/none")
        trees.append(r)
    swap.touch_all(trees[0], 1782737960)
    subprocess.run(["find", f"{trees[1]}/", "-mindepth", "1", "-execdir", "touch", "-hcd",
                    "@1782737960", "{}", "+"], check=True, timeout=60)  # fmt: skip

    def times(r: Path) -> dict[str, int]:
        return {str(p.relative_to(r)): p.lstat().st_mtime_ns for p in r.rglob("*")}

    assert times(trees[0]) == times(trees[1])
    assert set(times(trees[0]).values()) == {1782737960 * 10**9}


def test_a_package_without_links_or_folders_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """what-if asks each kept package for its links and folders; one that has none is not
    read from its archive again on every question."""
    import io

    from openwrt_wolf.files import archive

    pkg_file = tmp_path / "plain-1.tar.gz"
    with tarfile.open(pkg_file, "w:gz") as t:
        data = b"x\n"
        info = tarfile.TarInfo("usr/share/plain.txt")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    reads = []
    real = archive.members

    def counted(*a: object, **kw: object) -> object:
        reads.append(a[0])
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(archive, "members", counted)
    pkg = pkgsource.Package("plain", "1", pkg_file)
    assert pkg.links() == [] and pkg.dirs() == [] and pkg.links() == []
    assert reads == [pkg_file]
    # a package that installs nothing at all (a collection, libc's stub): its empty file
    # list is an answer too
    meta_file = tmp_path / "meta-1.tar.gz"
    with tarfile.open(meta_file, "w:gz"):
        pass
    meta = pkgsource.Package("meta", "1", meta_file)
    assert meta.files() == [] and meta.files() == [] and meta.links() == [] and meta.dirs() == []
    assert reads == [pkg_file, meta_file, meta_file]  # once for files, once for the rest
