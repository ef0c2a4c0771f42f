"""Apply the USE_WOLFSSL patch set (patches/series, patches/feeds/<feed>/series) to an OpenWrt tree.

Every series is first applied to a staging copy of only the files it touches; the tree itself
is written only when the whole series went through. So a failing patch leaves the tree as it
was, on a git checkout and on a plain directory alike (``git apply`` works outside a
repository). A stamp file beside the series' files records what was applied and the files'
contents afterwards: a second apply is recognised and does nothing, and a tree changed by hand
after patching is refused instead of patched twice.

A tree, a series and a stamp may come from anyone (docs/threat-model.md): a patch is read as
git reads it and git is asked which files it patches (patchset/diff.py), the tree is reached
only through patchset/staging.py (no link followed, nothing outside the series' directory),
the stamp only through patchset/stamp.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, proc
from ..errors import CommandError, WolfError
from ..trust import untrusted
from . import diff, staging, stamp
from .diff import FilePatch, Hunk, Patch

__all__ = ["FilePatch", "Hunk", "Patch"]  # a series' parts (patchset/diff.py)

STAMP = stamp.NAME
PATCHES_DIR = paths.PROJECT_ROOT / "patches"
MAX_SERIES = 1 << 20  # a series file: one patch name a line
_GIT_TIMEOUT = 120.0


@dataclass(frozen=True)
class Series:
    """An ordered patch list and the directory (relative to the tree) it applies to."""

    name: str  # "openwrt" or "feeds/<feed>"
    subdir: str  # "" for the tree itself
    patches: tuple[Patch, ...]

    def touched(self) -> list[str]:
        paths = {p for pt in self.patches for f in pt.files for p in (f.old, f.new) if p}
        return sorted(paths)


@dataclass
class PatchState:
    name: str
    state: str  # applied | unapplied | conflict | skipped


@dataclass
class SeriesStatus:
    series: str
    directory: str
    state: str  # applied | unapplied | conflict | modified | outdated | absent
    patches: list[PatchState] = field(default_factory=list)
    detail: str = ""


# --- reading patches -----------------------------------------------------------------------


def read_series(series_file: Path, name: str, subdir: str) -> Series:
    """A quilt series file: one patch name a line, '#' comments, optional -p1 (the only one)."""
    inside = Path(os.path.realpath(series_file.parent))
    if not Path(os.path.realpath(series_file)).is_relative_to(inside):
        # its lines are shown in errors: a link to /etc/shadow would print a line of it
        raise WolfError(f"series file {series_file} is a link out of {series_file.parent}")
    raw = untrusted.read_bytes(series_file, "series file", MAX_SERIES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        n = raw.count(b"\n", 0, e.start) + 1
        raise WolfError(f"{series_file}:{n}: not UTF-8 text (byte {raw[e.start]:#04x})",
                        hint="a series file names one patch a line") from None  # fmt: skip
    patches: list[Patch] = []
    for n, line in enumerate(text.split("\n"), 1):  # "\n" alone ends a line, as for quilt
        fields = re.split(r"[ \t\r]+", line.split("#", 1)[0].strip(" \t\r"))
        if fields == [""]:
            continue
        where = f"{series_file}:{n}"
        fname, opts = diff.patch_name(fields[0], where), fields[1:]
        if opts and opts != ["-p1"]:
            raise WolfError(
                f"{where}: option {' '.join(opts)[:40]} not supported",
                hint="patches are -p1 (a/ b/ prefixes)",
            )
        p = series_file.parent / fname
        if not os.path.lexists(p):
            raise WolfError(f"{where}: patch {fname} not found in {p.parent}")
        if not Path(os.path.realpath(p)).is_relative_to(inside):
            raise WolfError(f"{where}: patch {fname} is a link out of {series_file.parent}")
        patches.append(diff.read(p, fname, f"patch {p}"))
    return Series(name, subdir, tuple(patches))


def load(patches_dir: Path = PATCHES_DIR) -> list[Series]:
    """The OpenWrt series (patches/series) and each feed's (patches/feeds/<feed>/series)."""
    top = patches_dir / "series"
    if not os.path.lexists(top):
        raise WolfError(f"no series file at {top}", hint="give the patches directory")
    out = [read_series(top, "openwrt", "")]
    feeds = patches_dir / "feeds"
    if feeds.is_dir():
        for d in sorted(untrusted.listdir(feeds, "feed series directory")):
            if d.is_dir() and os.path.lexists(d / "series"):
                feed = diff.patch_name(d.name, f"feed series directory {feeds}")
                out.append(read_series(d / "series", f"feeds/{feed}", f"feeds/{feed}"))
    return out


# --- git: what it reads of a patch, and applying it on the staging copy ------------------------

_SEEN: dict[str, frozenset[str]] = {}  # sha256 of a patch: the files git says it patches


def _git_env(cwd: Path) -> dict[str, str]:
    # the staging dir sits under a temp dir: stop git from finding an enclosing repository
    return {"GIT_CEILING_DIRECTORIES": str(cwd.parent)}


def _as_git_reads(patch: Patch) -> None:
    """WolfError unless git reads the same files from the patch as diff.parse did: whatever
    this project stages, installs and stamps, git patches, and nothing else."""
    key = patch.sha256()
    if key not in _SEEN:
        argv = ["git", "apply", "--numstat", "-z", "-p1", "--whitespace=nowarn", "-"]
        with tempfile.TemporaryDirectory(prefix="wolf-numstat-") as tmp:
            try:
                out = proc.run(argv, timeout=_GIT_TIMEOUT, cwd=tmp, env=_git_env(Path(tmp)),
                               input=patch.data).output  # fmt: skip
            except CommandError as e:
                reason = next((ln for ln in e.tail if ln.startswith("error:")), "")
                raise WolfError(f"patch {patch.name}: git apply cannot read it ({reason[:200]})",
                                hint="a patch is a unified diff") from None  # fmt: skip
        seen = set()
        for item in out.split("\0")[:-1]:
            m = re.fullmatch(r"(?:\d+|-)\t(?:\d+|-)\t(.+)", item, re.S)
            seen.add(m.group(1) if m else "\0")  # "\0": a line no patch path is
        _SEEN[key] = frozenset(seen)
    ours = {f.path for f in patch.files}
    if _SEEN[key] != ours:
        differ = sorted(_SEEN[key] ^ ours)
        raise WolfError(
            f"patch {patch.name}: git apply reads other files from it than its ---/+++ lines "
            f"name ({len(differ)} differ)",
            hint="a patch with renames, copies, binary or mode-only parts is not supported",
        )


def _git_apply(stage: Path, patch: Patch, *, reverse: bool) -> None:
    argv = ["git", "apply", "-p1", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
    try:
        # the bytes that were checked go to git: the file may have changed since
        proc.run(argv, timeout=_GIT_TIMEOUT, cwd=stage, env=_git_env(stage), input=patch.data)
    except CommandError as e:
        raise PatchConflict(patch, e.tail, reverse) from None


@contextlib.contextmanager
def staged(root: Path, series: Series, *, links: bool = True) -> Iterator[Path]:
    """A staging copy of the files the series touches (staging.copy_out), every patch checked
    against git's reading first."""
    for p in series.patches:
        _as_git_reads(p)
    with tempfile.TemporaryDirectory(prefix="wolf-patch-") as tmp:
        stage = Path(tmp) / "tree"
        stage.mkdir()
        staging.copy_out(root, series.touched(), stage, _where(series, root), links=links)
        yield stage


def _where(series: Series, root: Path) -> str:
    return f"{series.name} in {root}"


class PatchConflict(WolfError):
    """A patch does not apply: names the patch, the file and the hunk that failed."""

    def __init__(self, patch: Patch, output: list[str], reverse: bool = False) -> None:
        self.patch = patch
        self.file, self.hunk = _failed_hunk(patch, output)
        where = f"{self.file}, hunk #{self.hunk}" if self.hunk else self.file
        what = "does not revert" if reverse else "does not apply"
        reason = next((ln for ln in output if ln.startswith("error:")), "")
        super().__init__(
            f"patch {patch.name} {what} at {where}" + (f" ({reason[:200]})" if reason else ""),
            hint="the tree is unchanged; is it a v25.12.5 tree, or was the file edited?",
        )


def _failed_hunk(patch: Patch, output: list[str]) -> tuple[str, int | None]:
    """git apply says 'patch failed: FILE:LINE' (LINE = the hunk's old start), or names FILE."""
    for line in output:
        m = re.search(r"patch failed: (.+):(\d+)$", line)
        if m:
            fname, start = m.group(1), int(m.group(2))
            for f in patch.files:
                if f.path == fname or f.old == fname:
                    for i, h in enumerate(f.hunks, 1):
                        if h.old_start == start:
                            return fname, i
            return fname, None
    for line in output:
        m = re.match(r"error: (.+?): (No such file|does not exist|already exists)", line)
        if m:
            return m.group(1), None
    return "?", None


# --- state -----------------------------------------------------------------------------------


def _applies(root: Path, series: Series, *, reverse: bool) -> tuple[bool, PatchConflict | None]:
    """Whether the whole series applies (or reverts) on a staging copy; the tree is untouched."""
    order = list(reversed(series.patches)) if reverse else list(series.patches)
    with staged(root, series) as stage:
        for p in order:
            try:
                _git_apply(stage, p, reverse=reverse)
            except PatchConflict as e:
                return False, e
    return True, None


def _stamped(root: Path, st: stamp.Stamp, series: Series) -> Series:
    """The series exactly as it was applied, from the stamp's copies of the patches."""
    return Series(series.name, series.subdir, stamp.patches(st, root))


def note_edits(root: Path, files: list[str]) -> list[str]:
    """Another tool of ours (`invoke sources`: a version or hash line of a Makefile) edited
    ``files`` of a patched tree: when the applied series still reverts cleanly from the
    edited files, its stamp takes their new contents, so the edit is not mistaken for a
    hand edit; when it no longer reverts, WolfError names the files. Returns the files the
    stamp now records anew."""
    st = stamp.read(root)
    if st is None:
        return []
    where = f"patch stamp {stamp.path(root)}"
    touched = [f for f in files if f in st.files and staging.digest(root, f, where) != st.files[f]]
    if not touched:
        return []
    applied = _stamped(root, st, Series(st.series, "", ()))
    reverts, err = _applies(root, applied, reverse=True)
    if not reverts:
        raise WolfError(
            f"editing {', '.join(touched)} broke the applied patch set: {err}",
            hint="revert the patch set, run `invoke sources`, then apply it again",
        )
    now = {f: h for f in touched if (h := staging.digest(root, f, where)) is not None}
    stamp.write(root, st.series, applied.patches, {**st.files, **now})
    return touched


def series_status(tree: Path, series: Series) -> SeriesStatus:
    root = staging.series_root(tree, series.subdir)
    if root is None:
        where = str(tree / series.subdir)
        return SeriesStatus(series.name, where, "absent", detail="directory not present")
    st = stamp.read(root)
    if st is not None:
        where = f"patch stamp {stamp.path(root)}"
        changed = [f for f, h in st.files.items() if staging.digest(root, f, where) != h]
        if changed:
            return SeriesStatus(
                series.name,
                str(root),
                "modified",
                [PatchState(p.name, "applied") for p in series.patches],
                detail=f"changed after patching: {', '.join(sorted(changed))}",
            )
        was = [(p.name, p.sha256) for p in st.patches]
        now = [(p.name, p.sha256()) for p in series.patches]
        if was != now:
            differ = sorted({n for n, _ in set(was) ^ set(now)}) or ["the order"]
            return SeriesStatus(
                series.name,
                str(root),
                "outdated",
                [PatchState(n, "applied") for n, _ in was],
                detail=f"applied from another version of the series (differs: {', '.join(differ)})",
            )
    reverts, _ = _applies(root, series, reverse=True)
    if reverts:
        return SeriesStatus(
            series.name,
            str(root),
            "applied",
            [PatchState(p.name, "applied") for p in series.patches],
        )
    applies, err = _applies(root, series, reverse=False)
    if applies:
        return SeriesStatus(
            series.name,
            str(root),
            "unapplied",
            [PatchState(p.name, "unapplied") for p in series.patches],
        )
    assert err is not None
    states = []
    seen = False
    for p in series.patches:
        if p is err.patch:
            seen = True
            states.append(PatchState(p.name, "conflict"))
        else:
            states.append(PatchState(p.name, "skipped" if seen else "unapplied"))
    return SeriesStatus(series.name, str(root), "conflict", states, detail=str(err))


# --- writing the tree ------------------------------------------------------------------------


def _run_series(root: Path, series: Series, *, reverse: bool) -> dict[str, str]:
    order = list(reversed(series.patches)) if reverse else list(series.patches)
    files = series.touched()
    with staged(root, series) as stage:
        for p in order:
            _git_apply(stage, p, reverse=reverse)  # raises PatchConflict; tree not touched yet
        return staging.install(stage, root, files, _where(series, root))


@dataclass
class Outcome:
    series: str
    directory: str
    action: str  # applied | already-applied | reverted | not-applied | would-apply | skipped
    patches: list[str]


def apply(tree: Path, all_series: list[Series], *, check: bool = False) -> list[Outcome]:
    """Apply every series in order. Already applied = no-op; any failure = nothing written."""
    _need_tree(tree)
    plan: list[tuple[Series, SeriesStatus]] = []
    for s in all_series:
        st = series_status(tree, s)
        if st.state == "outdated":
            raise WolfError(
                f"{s.name} in {st.directory}: {st.detail}",
                hint="run --revert first (it uses the applied version), then apply",
            )
        if st.state in ("modified", "conflict"):
            raise WolfError(f"{s.name} in {st.directory}: {st.state}: {st.detail}")
        plan.append((s, st))
    out: list[Outcome] = []
    for s, st in plan:
        names = [p.name for p in s.patches]
        root = Path(st.directory)
        if st.state == "absent":
            out.append(Outcome(s.name, str(root), "skipped", names))
        elif st.state == "applied":
            if stamp.read(root) is None and not check:
                where = _where(s, root)
                now = {f: h for f in s.touched() if (h := staging.digest(root, f, where))}
                stamp.write(root, s.name, s.patches, now)
            out.append(Outcome(s.name, str(root), "already-applied", names))
        elif check:
            out.append(Outcome(s.name, str(root), "would-apply", names))
        else:
            stamp.write(root, s.name, s.patches, _run_series(root, s, reverse=False))
            out.append(Outcome(s.name, str(root), "applied", names))
    return out


def revert(tree: Path, all_series: list[Series]) -> list[Outcome]:
    """Revert applied series (feeds first, then the tree); unapplied ones are left alone."""
    _need_tree(tree)
    out: list[Outcome] = []
    for s in reversed(all_series):
        st = series_status(tree, s)
        root = Path(st.directory)
        names = [p.name for p in s.patches]
        if st.state == "modified":
            raise WolfError(f"{s.name} in {root}: {st.detail}", hint="undo those edits first")
        if st.state == "outdated":
            stamped = stamp.read(root)
            assert stamped is not None  # outdated: the stamp said so
            _run_series(root, _stamped(root, stamped, s), reverse=True)
        elif st.state == "applied":
            _run_series(root, s, reverse=True)
        else:
            out.append(Outcome(s.name, str(root), "not-applied", names))
            continue
        stamp.remove(root)
        out.append(Outcome(s.name, str(root), "reverted", names))
    return out


def status(tree: Path, all_series: list[Series]) -> list[SeriesStatus]:
    _need_tree(tree)
    return [series_status(tree, s) for s in all_series]


def _need_tree(tree: Path) -> None:
    if not tree.is_dir():
        raise WolfError(f"no OpenWrt tree at {tree}", hint="pass --tree PATH")
