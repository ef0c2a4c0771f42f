"""The sdk backend's base feed (feeds.conf `src-link base <tree>/package`): an OpenWrt tree of
the request's release with the USE_WOLFSSL patch set applied, from which the SDK compiles the
patch set's packages (build/sdk.py BaseFeed).

`build` never patches a tree it did not make:
- by default the release's pinned tree (host/upstream.py fetches and verifies it by pin) is
  copied into the cache and patched there, one copy per (release, patch set, source), reused
  while its stamp names all three; the pinned tree itself is only read;
- with --tree T: T itself when it already carries this patch set, else a copy of T patched in
  the cache; a T patched with another version of the series is refused.
Each tree's release (include/version.mk's VERSION_NUMBER) must be the request's."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..catalogue import releases
from ..errors import WolfError
from ..files import outputs
from ..files.locks import locked
from ..firmware.imageformats import bounded
from ..host import upstream
from ..patchset import series
from ..trust import untrusted
from .buildroot import Tree, patch_set_hash

STAMP = ".wolf-base.json"
# what a copy of a user's tree leaves out: build outputs, downloads, feeds, the git store
SKIP = {"build_dir", "staging_dir", "bin", "tmp", "dl", "feeds", "logs", ".git", ".wolf-sources"}
_VERSION = re.compile(r"^VERSION_NUMBER:=\$\(if \$\(VERSION_NUMBER\),\$\(VERSION_NUMBER\),(\S+)\)")


@dataclass(frozen=True)
class Base:
    top: Path  # the patched tree the SDK's base feed links
    identity: str  # the request's `tree`: the pin, or the user tree's git HEAD/version
    origin: str  # what the record's note says of it
    dl: Path  # the download folder the SDK uses (the tree's dl/: `sources` may fill it)


def version_number(top: Path) -> str | None:
    """The release a tree, SDK or ImageBuilder is of: include/version.mk's default
    VERSION_NUMBER (25.12.5, SNAPSHOT), None when it has none."""
    mk = top / "include" / "version.mk"
    try:
        text = bounded.read_file(mk, "include/version.mk", 1 << 20).decode(errors="replace")
    except WolfError:
        return None
    for line in text.splitlines():
        if m := _VERSION.match(line.strip()):
            return m.group(1)
    return None


def check_release(top: Path, what: str, release: str) -> None:
    """One line when ``top`` (an SDK, an ImageBuilder, a tree) is of another release."""
    want = releases.get(release).version_number
    got = version_number(top)
    if got is not None and got != want:
        other = next((r.name for r in releases.releases().values() if r.version_number == got),
                     got)  # fmt: skip
        raise WolfError(
            f"{what} {top} is OpenWrt {got}, the request is {releases.get(release).name}",
            hint=f"give the {what} of {releases.get(release).name}, or --release {other}",
        )


def identity(tree: Path | None, release: str) -> str:
    """The request's `tree` value, without copying anything."""
    if tree is not None:
        return Tree(tree).identity()
    pin = upstream.pin(f"openwrt-{releases.get(release).name}")
    return f"pin:{pin.name}:{pin.tree[:16]}"


def prepare(
    tree: Path | None, release: str, patches_dir: Path, say: Callable[[str], None] = print,
    *, copy: bool = False,
) -> Base:  # fmt: skip
    """The patched tree for the base feed (see the module's docstring); ``copy``: a copy
    even of a tree that carries the patch set (its Makefiles are about to be edited)."""
    rel = releases.get(release)
    show = say
    patch_set = patch_set_hash(patches_dir)
    if tree is None:
        src = upstream.openwrt_tree(rel.name)
        ident = identity(None, rel.name)
        origin = f"the pinned OpenWrt {rel.name} tree ({ident})"
    else:
        src = Tree(tree).top
        ident = identity(src, rel.name)
        origin = f"--tree {src}"
        check_release(src, "--tree", rel.name)
        state = _series_state(src, patches_dir)
        if state == "applied" and not copy:
            show(f"base feed: {src} already carries this patch set; used as it is")
            return Base(src, ident, f"{origin} (it carries this patch set)", src / "dl")
        if state in ("outdated", "modified"):
            how = ("patched with another version of the USE_WOLFSSL series" if state ==
                   "outdated" else "patched, and the patched files were edited since")  # fmt: skip
            raise WolfError(
                f"--tree {src} is {how}",
                hint=f"revert it (./wolf patch --revert --tree {src}) or give an unpatched tree",
            )
    check_release(src, "the tree", rel.name)
    key = hashlib.sha256(f"{ident}\0{src}".encode()).hexdigest()[:12]
    dest = paths.cache_dir() / "base-feeds" / f"{rel.name}-{patch_set[:16]}-{key}"
    want = {"release": rel.name, "patch_set": patch_set, "source": ident}
    with locked(dest.with_name(dest.name + ".lock")):
        if _stamped(dest) == want:
            return Base(dest, ident, f"{origin}, patched copy {dest}", _dl(dest, tree))
        show(f"base feed: copying {origin} to {dest} and applying the patch set")
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            work = tmp / "tree"
            shutil.copytree(src, work, symlinks=True, ignore=_skip(src) if tree else None,
                            copy_function=_copy_file)  # fmt: skip
            for o in series.apply(work, series.load(patches_dir)):
                show(f"base feed: {o.action} {o.series} ({len(o.patches)} patches)")
            # the copy is ours; a link the tree had at the stamp's name is replaced
            outputs.Owned(work, "the base feed's copy").write_text(STAMP, _json(want))
            outputs.publish(work, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Base(dest, ident, f"{origin}, patched copy {dest}", _dl(dest, tree))


def _dl(copy: Path, tree: Path | None) -> Path:
    # a user's tree keeps its downloads (read by the SDK, never written by us); a copy of
    # the pinned tree has its own dl/, which `build --sources` fills
    return Tree(tree).top / "dl" if tree is not None else copy / "dl"


def _copy_file(src: str, dst: str) -> object:
    """copytree's copy of what is neither a folder nor a link: a regular file, else one line
    (a FIFO would hang the copy or end it in shutil.Error, a device be read for ever)."""
    mode = os.lstat(src).st_mode
    if not stat.S_ISREG(mode):
        raise WolfError(f"{src} is {untrusted.kind_of(mode)}; a tree we copy holds files, "
                        "folders and links", hint="remove it from the tree")  # fmt: skip
    return shutil.copy2(src, dst)


def _skip(top: Path) -> Callable[[str, list[str]], set[str]]:
    """copytree's ignore: the build outputs at the tree's top only (package/dl is a name)."""

    def ignore(d: str, names: list[str]) -> set[str]:
        return SKIP & set(names) if Path(d) == top else set()

    return ignore


def _series_state(top: Path, patches_dir: Path) -> str:
    """ "applied" when every series of the set is applied as it is now, "outdated" when one
    was applied from another version, "modified" when patched files changed since, else
    "unapplied"."""
    states = {s.state for s in series.status(top, series.load(patches_dir))}
    states.discard("absent")  # a feed the tree does not have
    if states == {"applied"}:
        return "applied"
    for bad in ("outdated", "modified"):
        if bad in states:
            return bad
    return "unapplied"


def _stamped(dest: Path) -> dict[str, object] | None:
    d = untrusted.load_cached(dest / STAMP, "base feed stamp", lambda d: d)
    return d if isinstance(d, dict) else None


def _json(d: dict[str, str]) -> str:
    import json

    return json.dumps(d, sort_keys=True) + "\n"
