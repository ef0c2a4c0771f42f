"""`invoke sources`: fill an OpenWrt tree's dl/ from what this machine can reach, and say for
every file how close it is to what OpenWrt pinned.

What is needed comes from the tree (build/listing.py: OpenWrt's own `make download`). Each
file is then looked for, in order: already in dl/; in a local directory (`--sources`: files
under OpenWrt's names, and git repositories packed as OpenWrt packs a checkout,
build/pack.py); on a mirror holding files under OpenWrt's names (`--sources-url`, as
OpenWrt's sources mirror does); in Debian's source archive (build/from_debian.py). Every file is
verified against its PKG_HASH / PKG_MIRROR_HASH and classed:

  exact          the bytes OpenWrt pinned (also when recompressing Debian's tarball gives them)
  same-version   the same version or commit, other bytes (Debian's +dfsg repack, another
                 top directory, another packer): the tree's hash is overridden
  substitute     another version or commit (the tree's version and hash are overridden), own
                 keys for the keyring, or a host tool taken from Debian's binaries
  missing        nothing found

Anything but exact is used only when `--allow` names its class, and then written, with the
tree edits it needed (build/edit.py), to <tree>/wolf-substitutions.json, which the build
record carries. Nothing is silent."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from ... import proc, term
from ...errors import WolfError
from ...files import fetch as fetching
from ...files import outputs
from ...files.hashing import file_sha256
from ...files.locks import locked
from ...host import hosttools
from ...patchset import series
from ...trust import untrusted
from .. import packages
from . import edit, facts, from_debian, gitrepo, listing, pack
from .edit import Edit
from .listing import Needed
from .substitutions import (
    ALLOWABLE,
    CLASSES,
    SUBSTITUTIONS,
    Resolution,
    Substitutions,
    closest,
    parse_allow,
    read_substitutions,
    version_key,
    write_substitutions,
)

MIRROR_MAX = 1 << 30  # OpenWrt's biggest source (linux, gcc) is a fraction of this

__all__ = [
    "ALLOWABLE",
    "CLASSES",
    "SUBSTITUTIONS",
    "Resolution",
    "Substitutions",
    "closest",
    "fill",
    "list_for_tree",
    "parse_allow",
    "read_substitutions",
    "redo",
    "version_key",
]


class Filler:
    """One `invoke sources` run on one tree."""

    def __init__(
        self,
        tree: Path,
        *,
        local: list[Path],
        allow: tuple[str, ...],
        archive: from_debian.Archive | None,
        log: Path,
        urls: list[str] | None = None,
    ) -> None:
        self.tree = tree
        self.dl = tree / "dl"
        self.local = local
        self.urls = urls or []
        self._dead: set[str] = set()  # mirrors that could not be reached: not asked again
        self.allow = allow
        self.archive = archive
        self.log = log
        self.work = tree / ".wolf-sources" / "work"
        self._index: dict[str, list[from_debian.Orig]] = {}
        prev = read_substitutions(tree)
        # a file substituted by an earlier run is asked for under its new name and hash
        self._earlier = {
            (f["placed"], f["sha256"]): f
            for f in (prev.files if prev else ())
            if f["class"] != "exact" and f["placed"]
        }
        self._absent: dict[str, list[str]] = {}  # file -> Debian's listed origs the pool lacks

    # --- places -----------------------------------------------------------------------
    def _place(self, src: Path, name: str, *, move: bool = False) -> Path:
        """src as dl/<name>: dl/ is a directory we own (files/outputs.py Owned), so a link
        planted at the name is replaced, never written through."""
        dl = outputs.Owned(self.dl, "the tree's dl/")
        there, st = dl.stat(name), src.stat()
        if there is not None and (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino):
            return dl.path(name)  # the file itself (a --sources directory that is dl/)
        if move:  # our own work file: renamed in
            return dl.take(src, name)
        return dl.copy_file(src, name)

    def _fetched(self, n: Needed) -> tuple[Resolution | None, Path | None]:
        """The pinned bytes from dl/, a --sources directory (under OpenWrt's name) or a
        --sources-url mirror (``<url>/<file>``), by the one fetcher (files/fetch.py; the tree's
        lock is held): (exact, None), or (None, the first local file with other bytes)."""
        local = [d / n.file for d in self.local if (d / n.file).is_file()]
        if n.hash in ("", "x", "skip"):  # nothing to verify against: a local file is near
            return None, local[0] if local else None
        origins = [fetching.Origin(str(p)) for p in local]
        origins += [fetching.Origin(f"{base}/{n.file}", name=base) for base in self.urls
                    if base not in self._dead]  # fmt: skip
        try:
            got = fetching.fetch(self.dl / n.file, origins, fetching.sha256(n.hash), lock=None,
                                 max_bytes=MIRROR_MAX, past_mismatch=True,
                                 remove_bad=False)  # fmt: skip
        except fetching.NotFetched as e:
            near = next((Path(f.origin.where) for f in e.failures
                         if f.got is not None and not f.origin.is_url), None)  # fmt: skip
            for f in (f for f in e.failures if f.origin.is_url):
                if f.got is not None:
                    why = f"sha256 {f.got} is not the pinned {n.hash}: not used"
                else:
                    why = f.reason
                    if f.status is None:  # unreachable: the other files are not asked for
                        self._dead.add(f.origin.name)
                err = term.console(stderr=True)
                err.print(f"sources: {f.origin.where}: {why}", markup=False)
            return None, near
        origin = "dl/" if got.origin is None else got.origin.where
        return Resolution(n, "exact", origin, n.file, n.hash), None

    def _git_repo(self, n: Needed) -> Path | None:
        return self._git_repo_of(n.git_url)

    def _git_repo_of(self, url: str) -> Path | None:
        """A git repository of the project under a --sources directory: <dir>/<project>,
        <dir>/<project>.git, or the fetch tool's <dir>/<owner>+<project>/repo."""
        proj = re.sub(r"\.git$", "", url.rstrip("/").rsplit("/", 1)[-1])
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._+-]*", proj):  # a name, never a path
            return None
        for d in self.local:
            for cand in [d / proj, d / f"{proj}.git", *sorted(d.glob(f"*+{proj}/repo"))]:
                if (cand / "HEAD").is_file() or os.path.lexists(cand / ".git"):
                    return gitrepo.git_dir(cand)  # read as data only (gitrepo.py)
        return None

    # --- resolving --------------------------------------------------------------------
    def resolve(self, n: Needed) -> Resolution:
        """Never raises for one file: what went wrong is the missing file's note."""
        try:
            untrusted.file_name(n.file, "a file the tree asks for")  # a name in dl/, no path
            return self._resolve(n)
        except gitrepo.UnsafeRepository:
            raise  # an input to fix, not a file that is missing: the run stops, one line
        except WolfError as e:
            return Resolution(n, "missing", note=f"failed: {e.message}")

    def _carried(self, n: Needed) -> Resolution | None:
        """A substitute an earlier run placed and edited the tree for: kept as it was."""
        f = self._earlier.get((n.file, n.hash))
        have = self.dl / n.file
        if f is None or not (have.is_file() and file_sha256(have) == n.hash):
            return None
        orig = Needed(file=str(f["file"]), hash=str(f["expected"]), dirs=tuple(f["dirs"]))
        if not self._allowed(str(f["class"])):
            return Resolution(
                orig,
                "missing",
                note=f"an earlier run placed a {f['class']}; --allow {f['class']} to keep it",
            )
        return Resolution(
            orig,
            str(f["class"]),
            str(f["origin"]),
            n.file,
            n.hash,
            str(f["version"]),
            str(f["note"]),
            tuple(Edit.from_dict(e) for e in f["edits"]),
        )

    def _resolve(self, n: Needed) -> Resolution:
        carried = self._carried(n)
        if carried is not None:
            return carried
        r, near = self._fetched(n)
        if r is not None:
            return r
        if (r := self._from_pypi(n)) is not None:
            return r
        failed = ""
        try:
            if n.is_git or n.commit:
                if n.name == "openwrt-keyring":
                    return self._own_keys(n)
                r = self._from_git(n)
            else:
                r = self._from_debian(n) if self.archive is not None else None
        except gitrepo.UnsafeRepository:
            raise
        except WolfError as e:  # one source failing: the fallbacks below may still serve
            failed, r = f"failed: {e.message}", None
        if r is not None:
            return r
        if near is not None:
            return self._near(n, near)
        hb = self._host_binary(n)
        if hb is not None:
            return hb
        return Resolution(n, "missing", note=failed or self._missing_note(n))

    def _near(self, n: Needed, p: Path) -> Resolution:
        """A local file under OpenWrt's name with other bytes (a checkout packed elsewhere)."""
        gate = self._gate(n, "same-version", f"{p} has other bytes than OpenWrt's")
        if gate:
            return gate
        sha = file_sha256(p)
        edits = edit.set_hash(self.tree, n.dirs, n.hash, sha)
        self._place(p, n.file)
        return Resolution(
            n,
            "same-version",
            str(p),
            n.file,
            sha,
            n.version,
            "a local file under OpenWrt's name, other bytes",
            tuple(edits),
        )

    def _from_pypi(self, n: Needed) -> Resolution | None:
        """An sdist on PyPI that is upstream's release tarball (data/sources.toml [pypi])."""
        proj = facts.data().get("pypi", {}).get(self._name(n))
        if not proj or self.archive is None or not n.version:
            return None
        self.work.mkdir(parents=True, exist_ok=True)
        got = from_debian.pip_sdist(proj, n.version, self.work)
        if got is None:
            return None
        if file_sha256(got) != n.hash or got.name != n.file:
            got.unlink()
            return None
        self._place(got, n.file, move=True)
        return Resolution(n, "exact", f"pypi:{proj}=={n.version}", n.file, n.hash, n.version)

    def _missing_note(self, n: Needed) -> str:
        if n.is_git or n.commit:
            return f"no git repository of {n.git_url or n.name} under --sources"
        if n.file in self._absent:
            return (f"Debian's index lists {', '.join(self._absent[n.file])}, but its pool "
                    "serves none of them (HTTP 404)")  # fmt: skip
        return (
            "not in Debian's source archive" if self.archive else "no Debian lookup (--no-debian)"
        )

    def _allowed(self, cls: str) -> bool:
        return cls == "exact" or cls in self.allow

    def _gate(self, n: Needed, cls: str, why: str) -> Resolution | None:
        """None when the class may be used; else the file stays missing, saying why."""
        if self._allowed(cls):
            return None
        return Resolution(n, "missing", note=f"{why}; a {cls} is available (--allow {cls})")

    # --- git --------------------------------------------------------------------------
    def _from_git(self, n: Needed) -> Resolution | None:
        repo = self._git_repo(n)
        if repo is None:
            return None
        self.work.mkdir(parents=True, exist_ok=True)
        with gitrepo.reading(repo) as src:
            return self._from_git_source(n, src)

    def _from_git_source(self, n: Needed, src: gitrepo.Source) -> Resolution | None:
        repo, subdir = src.origin, pack.stem(n.file)
        commit = src.resolve(n.commit) if n.commit else ""
        if commit:
            out = self.work / n.file
            left_out = pack.git_pack(src, commit, subdir, out, submodules=n.submodules,
                                     find=self._git_repo_of)  # fmt: skip
            sha = file_sha256(out)
            if sha == n.hash:
                self._place(out, n.file, move=True)
                return Resolution(n, "exact", f"git:{repo}@{commit}", n.file, sha)
            gate = self._gate(
                n, "same-version", f"packed {commit[:8]} differs from PKG_MIRROR_HASH"
            )
            if gate:
                out.unlink()
                return gate
            edits = edit.set_hash(self.tree, n.dirs, n.hash, sha)
            self._place(out, n.file, move=True)
            return Resolution(
                n,
                "same-version",
                f"git:{repo}@{commit}",
                n.file,
                sha,
                commit,
                "the pinned commit, packed here: other bytes than OpenWrt's mirror"
                + _left_out_note(left_out),
                tuple(edits),
            )
        head = src.resolve("HEAD")
        if not head:
            return None
        gate = self._gate(n, "substitute", f"{repo} has no commit {n.commit[:8]}")
        if gate:
            return gate
        when = pack.commit_time(src, head)
        date = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")
        version = f"{date.replace('-', '.')}~{head[:8]}"
        name = n.file.replace(n.version, version) if n.version else ""
        if not name or name == n.file:
            raise WolfError(f"{n.file}: cannot name a substitute (PKG_VERSION {n.version!r})")
        out = self.work / name
        left_out = pack.git_pack(src, head, pack.stem(name), out,
                                 submodules=n.submodules, find=self._git_repo_of)  # fmt: skip
        sha = file_sha256(out)
        edits = [
            *edit.set_var(self.tree, n.dirs, "PKG_SOURCE_DATE", n.source_date, date),
            *edit.set_var(self.tree, n.dirs, "PKG_SOURCE_VERSION", n.commit, head),
            *edit.set_hash(self.tree, n.dirs, n.hash, sha),
            *self._extra_edits(n, name),
        ]
        self._place(out, name, move=True)
        rel = "older" if n.source_date and date < n.source_date else "other"
        return Resolution(
            n,
            "substitute",
            f"git:{repo}@{head}",
            name,
            sha,
            head,
            f"{rel} commit {head[:8]} ({date}) for {n.commit[:8]} "
            f"({n.source_date}): the newest the repository has" + _left_out_note(left_out),
            tuple(edits),
        )

    def _own_keys(self, n: Needed) -> Resolution:
        gate = self._gate(n, "substitute", "OpenWrt's keyring has no source here")
        if gate:
            return gate
        from . import keys

        subdir = pack.stem(n.file)
        out = self.work / n.file
        self.work.mkdir(parents=True, exist_ok=True)
        keys.pack_keyring(out, subdir, facts.data().get("own_keys", {}).get(n.name, {}))
        sha = file_sha256(out)
        edits = edit.set_hash(self.tree, n.dirs, n.hash, sha)
        self._place(out, n.file, move=True)
        return Resolution(
            n,
            "substitute",
            "own keys (generated here)",
            n.file,
            sha,
            n.commit,
            "keys made here, their private halves discarded: the image trusts no OpenWrt key",
            tuple(edits),
        )

    # --- Debian -----------------------------------------------------------------------
    def _origs(self, name: str) -> list[from_debian.Orig]:
        assert self.archive is not None
        out: list[from_debian.Orig] = []
        for pkg in from_debian.names_for(name):
            out += self._index.get(pkg, [])
        return out

    def prefetch_index(self, needed: list[Needed]) -> None:
        if self.archive is None:
            return
        wanted = {p for n in needed for p in from_debian.names_for(self._name(n))}
        self._index = self.archive.index(wanted)

    def _name(self, n: Needed) -> str:
        """The upstream project's name: the file name before its version."""
        base = pack.stem(n.file)
        if n.version and n.version in base:
            head = base[: base.index(n.version)].rstrip("-_")
            if head:
                return head
        m = re.match(r"^(.+?)[-_]?\d", base)
        return m.group(1) if m else base

    def _reachable(self, o: from_debian.Orig, unavailable: list[str]) -> bool:
        """Whether the pool has it (a HEAD request; the index lists some it lacks)."""
        assert self.archive is not None
        if o.filename in unavailable:
            return False
        cached = self.tree / ".wolf-sources" / "debian" / o.filename
        return cached.is_file() or self.archive.exists(o)

    def _download(self, o: from_debian.Orig) -> Path:
        assert self.archive is not None
        cache = self.tree / ".wolf-sources" / "debian"
        cache.mkdir(parents=True, exist_ok=True)
        return self.archive.download(o, cache / o.filename)

    def _topdir(self, n: Needed, version: str | None = None) -> str:
        table = facts.data().get("topdir", {})
        if n.file in table and version is None:
            return str(table[n.file])
        base = n.build_dir or pack.stem(n.file).replace("_", "-")
        if version is not None and n.version:
            base = base.replace(n.version, version)
        return base

    def _from_debian(self, n: Needed) -> Resolution | None:
        name = self._name(n)
        origs = self._origs(name)
        if not origs:
            return None
        ext = pack.extension(n.file)
        inner = facts.data().get("inner", {})
        unavailable: list[str] = []
        for o in origs:
            if o.sha256 == n.hash:
                try:
                    self._place(self._download(o), n.file)
                except from_debian.NotInPool:
                    unavailable.append(o.filename)
                    continue
                return Resolution(n, "exact", o.url, n.file, n.hash, o.upstream)
        listed = origs
        origs = [o for o in origs if self._reachable(o, unavailable)]
        if not origs:  # the index names them, the pool serves none (a partial mirror)
            self._absent[n.file] = sorted({o.filename for o in listed})
            return None
        version = n.version or ""
        same = [o for o in origs if version and o.plain_upstream == version]
        for o in same:
            r = self._recompressed(n, o, ext, inner.get(o.package))
            if r is not None:
                return r
        if same:
            gate = self._gate(n, "same-version", f"Debian's {same[0].filename} has other bytes")
            if gate:
                return gate
            o = same[-1]
            out = self.work / n.file
            self._repack(o, out, self._topdir(n), inner.get(o.package))
            sha = file_sha256(out)
            edits = edit.set_hash(self.tree, n.dirs, n.hash, sha)
            edits += self._extra_edits(n, n.file)
            self._place(out, n.file, move=True)
            marks = o.upstream.removeprefix(version) or ""
            note = f"Debian {o.version}, repacked as OpenWrt names it" + (
                f" (Debian's upstream tarball is {o.upstream}: files removed)" if marks else ""
            )
            return Resolution(n, "same-version", o.url, n.file, sha, o.upstream, note, tuple(edits))
        pins = facts.data().get("pin", {})
        versions = sorted({o.plain_upstream for o in origs}, key=version_key)
        pick = pins.get(name) or closest(version, versions)
        if pick is None or not version:
            return None
        gate = self._gate(n, "substitute", f"Debian has {', '.join(versions)}, not {version}")
        if gate:
            return gate
        o = [x for x in origs if x.plain_upstream == pick][-1]
        newname = n.file.replace(version, pick)
        out = self.work / newname
        self._repack(o, out, self._topdir(n, pick), inner.get(o.package))
        sha = file_sha256(out)
        edits = [
            *edit.set_var(self.tree, n.dirs, "PKG_VERSION", version, pick),
            *edit.set_hash(self.tree, n.dirs, n.hash, sha),
            *self._extra_edits(n, newname),
        ]
        self._place(out, newname, move=True)
        return Resolution(
            n,
            "substitute",
            o.url,
            newname,
            sha,
            pick,
            f"Debian {o.version} for {version}",
            tuple(edits),
        )

    def _extra_edits(self, n: Needed, placed: str) -> list[Edit]:
        """data/sources.toml [[edit]] for a file that is not exact: hunks of a patch the
        substitute cannot take, or a patch it already contains."""
        out: list[Edit] = []
        for e in facts.data().get("edit", []):
            if e.get("file") != n.file or e.get("placed", placed) != placed:
                continue
            if "drop_hunks" in e:
                out += edit.drop_hunks(self.tree, e["patch"], e["drop_hunks"])
            if e.get("drop_patch"):
                out += edit.remove_file(self.tree, e["patch"], str(e.get("why", "")))
            if "replace" in e:
                old, new = (str(x) for x in e["replace"])
                out += edit.replace_text(self.tree, e["path"], old, new)
            if "add" in e:
                out += edit.add_file(self.tree, e["add"], str(e["text"]), str(e.get("why", "")))
        return out

    def _repack(self, o: from_debian.Orig, out: Path, topdir: str, inner: str | None) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        src = self._download(o)
        if inner:  # the upstream tarball inside Debian's orig tarball
            name = inner.format(version=o.plain_upstream)
            src = pack.extract_member(src, name, self.work / f".inner-{name}")
        try:
            same_ext = pack.extension(src.name) == pack.extension(out.name)
            # work/ is the tree's bookkeeping: a link at the name is replaced or removed
            book, rel = edit.owned(self.tree), f"{edit.BOOKKEEPING}/work/{out.name}"
            if same_ext and pack.single_top(src) == topdir:  # as OpenWrt names it: keep it
                book.copy_file(src, rel)
                return
            book.unlink(rel)  # repack creates the file: never opens one a link names
            with term.progress(f"repack {out.name}"):
                pack.repack(src, out, topdir)
        finally:
            if inner:
                src.unlink(missing_ok=True)

    def _recompressed(
        self, n: Needed, o: from_debian.Orig, ext: str, inner: str | None
    ) -> Resolution | None:
        """Debian's tarball recompressed the way upstream's was: exact when a compressor of
        data/sources.toml [recompress] gives PKG_HASH."""
        cmds = facts.data().get("recompress", {}).get(ext, [])
        if not cmds or inner or o.size > facts.data().get("recompress_max_mb", 64) << 20:
            return None
        src = self._download(o)
        self.work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="wolf-recompress-", dir=self.work) as tmp:
            raw = Path(tmp) / "raw.tar"
            pack.decompress(src, raw)
            for argv in cmds:
                out = Path(tmp) / n.file
                pack.recompress_with(raw, out, argv)
                if file_sha256(out) == n.hash:
                    self._place(out, n.file, move=True)
                    return Resolution(
                        n,
                        "exact",
                        o.url,
                        n.file,
                        n.hash,
                        o.upstream,
                        f"Debian's {o.filename} recompressed with {' '.join(argv)}",
                    )
        return None

    # --- host tools from Debian's binaries ----------------------------------------------
    def _host_binary(self, n: Needed) -> Resolution | None:
        tools = [d for d in n.dirs if d.startswith("tools/")]
        table = facts.data().get("host_binary", {})
        spec = table.get(tools[0].removeprefix("tools/")) if len(tools) == 1 else None
        if not spec:
            return None
        gate = self._gate(n, "substitute", "no source; Debian's binary can stand in")
        if gate:
            return gate
        tool = tools[0].removeprefix("tools/")
        if not spec.get("debian"):  # built for the target, used only by images not made here
            return self._host_unbuilt(n, tool, str(spec.get("why", "")))
        if spec.get("host_tools"):
            hosttools.ensure([_on_host(str(t)) for t in spec["host_tools"]])
        links = {k: _on_host(str(v)) for k, v in spec.get("links", {}).items()}
        text = packages.render(
            "host-binary.mk.j2",
            file=n.file,
            tool=tool,
            name=n.name,
            version=n.version,
            debian=spec["debian"],
            links=links,
        )
        why = f"Debian's {spec['debian']} binaries: {spec.get('why', '')}".strip()
        edits = edit.replace_file(self.tree, f"{tools[0]}/Makefile", text, why)
        return Resolution(
            n, "substitute", f"debian-binary:{spec['debian']}", "", "", "", why, tuple(edits)
        )

    def _host_unbuilt(self, n: Needed, tool: str, why: str) -> Resolution:
        """A host tool with no source anywhere reachable and no Debian binary, which the
        target builds for images of other devices: its Makefile installs nothing, so a
        recipe that calls it fails by the missing program, never silently."""
        text = packages.render(
            "host-binary.mk.j2", file=n.file, tool=tool, name=n.name, version=n.version,
            debian="", links={},
        )  # fmt: skip
        why = f"not built: {why}"
        edits = edit.replace_file(self.tree, f"tools/{tool}/Makefile", text, why)
        return Resolution(n, "substitute", "not-built", "", "", "", why, tuple(edits))


def _left_out_note(paths: list[str]) -> str:
    if not paths:
        return ""
    return (
        f"; the repository lacks {', '.join(paths[:5])}{' ...' if len(paths) > 5 else ''}: left out"
    )


def put_back_unlisted(tree: Path) -> list[str]:
    """Put back the tree files an earlier run edited that no entry of the substitutions file
    names (the file stopped being needed, or was left out of a run's list): the tree is always
    OpenWrt's own plus the listed edits, never an edit nobody sees, and the next listing reads
    OpenWrt's pins, not a substitute's."""
    prev = read_substitutions(tree)
    listed = {str(e["path"]) for f in (prev.files if prev else ()) for e in f["edits"]}
    return edit.revert_paths(tree, [r for r in edit.kept(tree) if r not in listed])


def redo(tree: Path, files: list[str]) -> list[str]:
    """Undo an earlier run's edits for these files (OpenWrt's names), so the next run
    resolves them from the original pins again (e.g. after data/sources.toml changed how
    they are found). Returns the files put back."""
    prev = read_substitutions(tree)
    known = {str(f["file"]): f for f in (prev.files if prev else ())}
    unknown = [f for f in files if f not in known]
    if unknown:
        raise WolfError(f"--redo {', '.join(unknown)}: not in {tree / SUBSTITUTIONS}")
    paths = [str(e["path"]) for f in files for e in known[f]["edits"]]
    return edit.revert_paths(tree, paths)


def build_env(out: list[Resolution]) -> tuple[tuple[str, str], ...]:
    """data/sources.toml [build_env.<kind>] for the kinds of substitute used."""
    kinds = {"git-substitute" for r in out if r.cls == "substitute" and r.origin.startswith("git:")}
    env: dict[str, str] = {}
    for kind in sorted(kinds):
        spec = facts.data().get("build_env", {}).get(kind, {})
        env.update({k: str(v) for k, v in spec.items() if k != "why"})
    return tuple(sorted(env.items()))


def list_for_tree(tree: Path, log: Path, configs: list[Path] | None = None) -> list[Needed]:
    """The union of what the tree needs for each of ``configs`` (seeds `make defconfig`
    expands), or for its current .config."""
    if not configs:
        return listing.list_needed(tree, log, on_step=_step)
    merged: dict[str, Needed] = {}
    # the tree's .config is written by Owned: a link at its name is replaced (each seed and
    # the put-back), never written through; a folder on the way is none (the tree's top)
    o = outputs.Owned(tree, "the OpenWrt tree")
    st = o.stat(".config")
    saved = (tree / ".config").read_bytes() if st and stat.S_ISREG(st.st_mode) else b""

    def put_back(out: IO[bytes]) -> None:
        out.write(saved)

    try:
        for cfg in configs:
            o.copy_file(cfg, ".config")
            from ..buildroot import Tree

            Tree(tree).defconfig((tree / ".config").read_text(), log)
            for n in listing.list_needed(tree, log, on_step=_step):
                merged.setdefault(n.file, n)
    finally:
        if saved:
            o.write(".config", put_back)
    return sorted(merged.values(), key=lambda n: n.file)


def _step(s: str) -> None:
    term.console(stderr=True).print(f"[dim]sources: {s}[/dim]")


def fill(
    tree: Path,
    needed: list[Needed],
    *,
    local: list[Path],
    allow: tuple[str, ...],
    debian: bool,
    log: Path,
    urls: list[str] | None = None,
    on_file: Callable[[Resolution], None] | None = None,
) -> Substitutions:
    """Resolve every needed file into dl/ and write the substitutions file."""
    (tree / "dl").mkdir(exist_ok=True)
    listed = {n.file for n in needed}
    marker = "# openwrt-wolf: "  # templates/host-binary.mk.j2's first line
    replaced = listing.replaced_by_us(tree, tree / edit.ORIG_DIR, marker)
    needed = needed + [n for n in replaced if n.file not in listed]
    archive = from_debian.Archive() if debian else None
    filler = Filler(tree, local=local, allow=allow, archive=archive, log=log, urls=urls)
    filler.prefetch_index(needed)
    out: list[Resolution] = []
    with locked(tree / ".wolf-sources" / ".lock"), term.progress("sources", len(needed)) as bar:
        for n in needed:
            r = filler.resolve(n)
            out.append(r)
            if on_file:
                on_file(r)
            bar.advance()
    with contextlib.suppress(OSError):
        shutil.rmtree(filler.work)
    # the patch set's stamp takes the edited Makefiles (ustream-ssl, wolfssl are patched too)
    edited = sorted({e.path for r in out for e in r.edits})
    series.note_edits(tree, edited)
    subs = Substitutions(
        tree=str(tree),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        allow=allow,
        files=tuple(r.to_dict() for r in out),
        env=build_env(out),
    )
    write_substitutions(tree, subs)
    return subs


def _on_host(path: str) -> str:
    """A Debian path of data/sources.toml on this machine: {multiarch} is the host's
    triplet (x86_64-linux-gnu, aarch64-linux-gnu), as Debian's gcc prints it."""
    return path.replace("{multiarch}", _multiarch()) if "{multiarch}" in path else path


@functools.cache
def _multiarch() -> str:
    return proc.run(["gcc", "-dumpmachine"], timeout=30).output.strip()
