"""Source tarballs made the way OpenWrt makes them, so their sha256 can equal PKG_HASH or
PKG_MIRROR_HASH: a git checkout packed as include/download.mk's rawgit method packs it, and a
tarball repacked under OpenWrt's name (top directory, compression).

rawgit, step by step: `git archive` of the commit (core.abbrev 8 for export-subst; git reads
the repository as data only, build/sources/gitrepo.py), extracted
with umask 022, then GNU tar `--numeric-owner --owner=0 --group=0 --mode=a-s --sort=name
--mtime=@<commit time>` piped into `zstd -T0 --ultra -20` (dl_pack/zst). zstd 1.5.7's
multi-threaded frame is what OpenWrt's own staging zstd writes; the zstandard module bundles
1.5.7 and writes the same bytes with threads >= 1 (Debian 12's zstd 1.5.4 does not)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from ... import proc
from ...errors import WolfError
from ...files import archive, outputs
from . import gitrepo
from .gitrepo import Source

MAX_MISSING = 50
TAR_TIMEOUT = 1800.0
EXTENSIONS = ("tar.gz", "tgz", "tar.bz2", "tar.xz", "tar.zst")


def extension(name: str) -> str:
    """The compression part of a tarball's name ("gz", "bz2", "xz", "zst"), or ""."""
    for ext in EXTENSIONS:
        if name.endswith("." + ext):
            return "gz" if ext == "tgz" else ext.rsplit(".", 1)[1]
    return ""


def stem(name: str) -> str:
    """The name without its tarball extension (and Debian's ".orig")."""
    for ext in EXTENSIONS:
        if name.endswith("." + ext):
            name = name[: -len(ext) - 1]
            break
    return name.removesuffix(".orig")


def compress(raw: Path, dest: Path, ext: str, *, fast: bool = False) -> None:
    """``raw`` (an uncompressed tar) into ``dest`` as download.mk's dl_pack writes ``ext``:
    gzip -n, bzip2 (-9), xz -7e, zstd -T0 --ultra -20. ``fast``: xz -6 instead of -7e, for a
    repack whose bytes OpenWrt never pinned anyway."""
    with raw.open("rb") as src, dest.open("wb") as out:
        if ext == "zst":
            import zstandard  # here: a cached build packs nothing

            cctx = zstandard.ZstdCompressor(level=20, threads=2, write_checksum=True)
            obj = cctx.compressobj()
            while chunk := src.read(1 << 20):
                out.write(obj.compress(chunk))
            out.write(obj.flush())
        elif ext == "gz":
            with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as g:
                shutil.copyfileobj(src, g, 1 << 20)
        elif ext == "bz2":
            with bz2.BZ2File(out, "wb", compresslevel=9) as b:
                shutil.copyfileobj(src, b, 1 << 20)
        elif ext == "xz":
            preset = 6 if fast else 7 | lzma.PRESET_EXTREME
            with lzma.LZMAFile(out, "wb", format=lzma.FORMAT_XZ, preset=preset) as x:
                shutil.copyfileobj(src, x, 1 << 20)
        else:
            raise WolfError(f"{dest.name}: no packing for .{ext or '?'}")


def decompress(src: Path, raw: Path) -> None:
    """A compressed tarball into its uncompressed tar."""
    ext = extension(src.name)
    if ext not in ("gz", "bz2", "xz", "zst"):
        raise WolfError(f"{src.name} is not a tarball this tool unpacks (.gz .bz2 .xz .zst)")
    with raw.open("wb") as out:
        if ext == "zst":
            import zstandard

            with src.open("rb") as f:
                zstandard.ZstdDecompressor().copy_stream(f, out)
            return
        with _open_compressed(src, ext) as c:
            shutil.copyfileobj(c, out, 1 << 20)


def _open_compressed(src: Path, ext: str) -> IO[bytes]:
    if ext == "gz":
        return gzip.open(src, "rb")  # type: ignore[return-value]  # GzipFile is a binary IO
    if ext == "bz2":
        return bz2.open(src, "rb")
    return lzma.open(src, "rb")


def recompress_with(raw: Path, dest: Path, argv: Sequence[str]) -> None:
    """``raw`` through an external compressor (e.g. ["gzip", "-n", "-9"]): how some upstream
    tarballs were made, tried to reproduce OpenWrt's bytes from Debian's tarball."""
    # the compressor reads and writes files; argv comes from data/sources.toml, not input
    proc.run(
        ["sh", "-c", '"$@" -c < "$0" > "$WOLF_OUT"', raw, *argv],
        timeout=TAR_TIMEOUT,
        env={"WOLF_OUT": str(dest)},
        tail_lines=5,
    )


def _tar_pack(parent: Path, subdir: str, mtime: str, raw: Path) -> None:
    """download.mk's dl_tar_pack, without the compressor."""
    proc.run(
        [
            "tar",
            "--numeric-owner",
            "--owner=0",
            "--group=0",
            "--mode=a-s",
            "--sort=name",
            f"--mtime={mtime}",
            "-c",
            "-f",
            raw,
            subdir,
        ],
        cwd=parent,
        timeout=TAR_TIMEOUT,
        tail_lines=5,
    )


def pack_dir(parent: Path, subdir: str, mtime: int, dest: Path, *, fast: bool = False) -> None:
    """``parent/subdir`` packed as dl_tar_pack packs a checkout, into ``dest`` (``fast``: see
    compress)."""
    raw = parent / f".{subdir}.tar"
    _tar_pack(parent, subdir, f"@{mtime}", raw)
    part = dest.with_name(dest.name + ".part")
    compress(raw, part, extension(dest.name), fast=fast)
    raw.unlink()
    outputs.publish(part, dest)


def _extract(tarball: Path, into: Path) -> None:
    """Unpacked by the one safe extractor (archive.py). Its modes are what GNU tar writes with
    umask 022 for everything `git archive` emits (0664/0775 -> 0644/0755); a read-only file of
    another tarball comes out owner-writable (only repacks, never an exact file, see that)."""
    archive.extract(tarball, into, archive.TREE, what="source tarball")


def commit_time(repo: Path | Source, commit: str) -> int:
    """The commit's committer time, as rawgit's `git log -1 --format=%ct` gives it."""
    with gitrepo.reading(repo) as src:
        full = _commit(src, commit)
        out = src.git("show", "-s", "--no-show-signature", "--format=%ct", full).output
    return int(out.strip())


def resolve_commit(repo: Path | Source, rev: str) -> str:
    """A revision (HEAD, a tag, an abbreviated commit) as a full commit id, or ""."""
    with gitrepo.reading(repo) as src:
        return src.resolve(rev)


def _commit(src: Source, rev: str) -> str:
    full = src.resolve(rev)
    if not full:
        raise WolfError(f"git repository {src.origin} has no commit {rev[:40]!r}")
    return full


def _archive(src: Source, commit: str, archive: Path) -> list[str]:
    """`git archive` of ``commit``; a snapshot that lacks some blobs (GitHub snapshots leave
    out big files such as gnulib's ChangeLog) is archived without them. Returns the paths
    left out."""
    left_out: list[str] = []
    for _ in range(MAX_MISSING):
        done = src.git(
            "archive",
            "--format=tar",
            f"--output={archive}",
            commit,
            "--",
            ".",
            *(f":(exclude,literal){p}" for p in left_out),
            check=False,
        )
        if done.returncode == 0:
            return left_out
        missing = re.findall(r"invalid object [0-7]+ [0-9a-f]+ for '([^']+)'", done.output)
        if not missing or set(missing) <= set(left_out):
            raise WolfError(
                f"git archive {commit[:12]} of {src.origin} failed: "
                f"{done.output.strip().splitlines()[-1] if done.output.strip() else ''}"
            )
        left_out += [m for m in missing if m not in left_out]
    raise WolfError(
        f"git archive {commit[:12]} of {src.origin}: more than {MAX_MISSING} files missing"
    )


SubmoduleRepo = Callable[[str], "Path | None"]  # a submodule's URL -> a repository of it


def _gitlinks(src: Source, commit: str) -> list[tuple[str, str]]:
    """(path, commit) of every submodule of ``commit``: its tree's mode-160000 entries."""
    out = src.git("ls-tree", "-r", "-z", commit).output
    links = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] == "160000":
            links.append((path, parts[2]))
    return links


def _submodule_url(src: Source, commit: str, path: str) -> str:
    # --no-includes: a committed .gitmodules could include any file of this machine
    blob = ["config", "--no-includes", "--blob", f"{commit}:.gitmodules"]
    done = src.git(*blob, "--get-regexp", r"^submodule\..*\.path$", check=False)
    for line in done.output.splitlines():
        key, _, value = line.partition(" ")
        if value == path:
            name = key.removeprefix("submodule.").removesuffix(".path")
            return src.git(*blob, f"submodule.{name}.url").output.strip()
    raise WolfError(f"submodule {path} of {commit[:12]} is not in its .gitmodules")


def _checkout_submodules(
    src: Source,
    commit: str,
    top: Path,
    into: Path,
    wanted: str,
    find: SubmoduleRepo,
    modules: str = "",
    links: list[tuple[str, str]] | None = None,
) -> None:
    """What rawgit's `git submodule update --init --recursive -- $(SUBMODULES)` leaves: each
    submodule's files as `git checkout` writes them (no export attributes), and in its folder
    the one-line .git file pointing into the superproject's .git/modules/."""
    for path, sub in _gitlinks(src, commit) if links is None else links:
        if wanted and path not in wanted.split():
            continue
        url = _submodule_url(src, commit, path)
        sub_repo = find(url)
        if sub_repo is None:
            raise WolfError(f"no git repository of {url} (submodule {path}) under --sources")
        dest = into / path
        if not dest.resolve().is_relative_to(top.resolve()):
            raise WolfError(f"submodule path {path!r} leaves the checkout")
        dest.mkdir(parents=True, exist_ok=True)
        with (
            gitrepo.reading(sub_repo) as sub_src,
            tempfile.TemporaryDirectory(prefix="wolf-subidx-") as idx,
        ):
            env = {"GIT_INDEX_FILE": str(Path(idx) / "index")}
            sub = _commit(sub_src, sub)
            sub_src.git("read-tree", sub, env=env)
            sub_src.git("--work-tree", dest, "checkout-index", "-a", "-f", env=env)
            # git's gitdir for a submodule at P (of a submodule at S): .git/modules/[S/modules/]P,
            # written relative to the submodule's folder
            gitdir = f"{modules}{path}"
            up = "../" * len(dest.relative_to(top).parts)
            outputs.write_text(dest / ".git", f"gitdir: {up}.git/modules/{gitdir}\n")
            _checkout_submodules(sub_src, sub, top, dest, "", find, f"{gitdir}/modules/")


def git_pack(
    repo: Path | Source,
    commit: str,
    subdir: str,
    dest: Path,
    *,
    submodules: str = "skip",
    find: SubmoduleRepo | None = None,
) -> list[str]:
    """Pack ``commit`` of the git repository ``repo`` (a git directory, bare or a checkout's
    .git; read as data, build/sources/gitrepo.py) as OpenWrt's rawgit method packs a checkout
    into ``dest`` (its extension says the compression). ``submodules`` is
    PKG_SOURCE_SUBMODULES ("" all, "skip" none, else paths), their repositories found by
    ``find``. Returns the paths the repository lacks blobs for (left out of the tarball)."""
    if not re.fullmatch(r"[A-Za-z0-9._+~-]+", subdir):
        raise WolfError(f"unusable top directory name {subdir!r}")
    with (
        gitrepo.reading(repo) as src,
        tempfile.TemporaryDirectory(prefix="wolf-gitpack-", dir=dest.parent) as tmp,
    ):
        t = Path(tmp)
        commit = _commit(src, commit)
        archive = t / "archive.tar"
        left_out = _archive(src, commit, archive)
        (t / subdir).mkdir()
        _extract(archive, t / subdir)
        links = [] if submodules == "skip" else _gitlinks(src, commit)
        if links:
            if find is None:
                raise WolfError(f"{subdir}: has submodules and no way to find them")
            _checkout_submodules(src, commit, t / subdir, t / subdir, submodules, find,
                                 links=links)  # fmt: skip
        for leftover in (".git", ".gitmodules"):
            p = t / subdir / leftover
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
        pack_dir(t, subdir, commit_time(src, commit), dest)
    return left_out


def top_dirs(tarball: Path, *, stop_after: int = 0) -> set[str]:
    """The first path components in a tarball (any compression archive.py reads); with
    ``stop_after`` it stops reading once it has seen that many."""
    tops: set[str] = set()
    for m, _data in archive.members(tarball, archive.TREE, what="source tarball"):
        first = m.name.split("/", 1)[0]
        if first and first != "pax_global_header":
            tops.add(first)
            if stop_after and len(tops) >= stop_after:
                break
    return tops


def single_top(src: Path) -> str:
    """The one top directory of a tarball, "" when it has several."""
    tops = top_dirs(src, stop_after=2)
    return tops.pop() if len(tops) == 1 else ""


def extract_member(src: Path, name: str, dest: Path) -> Path:
    """The file called ``name`` inside the tarball ``src`` (Debian's gcc orig tarball holds
    the upstream tarball), written to ``dest``."""
    for m, data in archive.members(src, archive.TREE, what="source tarball"):
        if m.kind == "file" and m.name.rsplit("/", 1)[-1] == name:
            with dest.open("wb") as out:
                for chunk in data:
                    out.write(chunk)
            return dest
    raise WolfError(f"{src.name} holds no {name}")


def repack(src: Path, dest: Path, topdir: str) -> None:
    """The tarball ``src`` as ``dest``: its one top directory renamed to ``topdir``, packed
    deterministically (sorted names, owner 0, the newest mtime of its files) with ``dest``'s
    compression."""
    with tempfile.TemporaryDirectory(prefix="wolf-repack-", dir=dest.parent) as tmp:
        t = Path(tmp)
        raw = t / "in.tar"
        decompress(src, raw)
        tops = top_dirs(raw)
        if len(tops) != 1:
            raise WolfError(f"{src.name} has {len(tops)} top directories, not one")
        (top,) = tops
        work = t / "x"
        work.mkdir()
        _extract(raw, work)
        raw.unlink()
        if top != topdir:
            outputs.publish(work / top, work / topdir)
        # the unpacker sets files' and directories' times, not a symbolic link's (its time is
        # now): counted, a link made every repack differ (two hashes for one file name)
        files = (p for p in (work / topdir).rglob("*") if not p.is_symlink())
        newest = max((p.lstat().st_mtime for p in files), default=0)
        pack_dir(work, topdir, int(newest), dest, fast=True)
