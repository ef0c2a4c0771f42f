"""Apply the USE_WOLFSSL patch set (patches/series, patches/feeds/<feed>/series) to an OpenWrt tree.

Every series is first applied to a staging copy of only the files it touches; the tree itself
is written only when the whole series went through. So a failing patch leaves the tree as it
was, on a git checkout and on a plain directory alike (``git apply`` works outside a
repository). A stamp file beside the series' files records what was applied and the files'
contents afterwards: a second apply is recognised and does nothing, and a tree changed by hand
after patching is refused instead of patched twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, proc
from ..errors import CommandError, WolfError

STAMP = ".wolf-patches.json"
PATCHES_DIR = paths.PROJECT_ROOT / "patches"
_GIT_TIMEOUT = 120.0


@dataclass(frozen=True)
class Hunk:
    old_start: int
    header: str


@dataclass(frozen=True)
class FilePatch:
    """One file's part of a patch: its path before and after (None = created/deleted)."""

    old: str | None
    new: str | None
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new or self.old or "?"


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    files: tuple[FilePatch, ...]

    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


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

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def _strip(path: str) -> str | None:
    """The path of a ---/+++ line with -p1 applied; None for /dev/null."""
    path = path.split("\t", 1)[0].strip()
    if path == "/dev/null":
        return None
    return path.split("/", 1)[1] if "/" in path else path


def parse_patch(path: Path) -> Patch:
    """Files and hunks of a unified diff (quilt -p1 style, with or without git headers)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise WolfError(f"cannot read patch {path}: {e.strerror}") from None
    files: list[FilePatch] = []
    old: str | None = None
    new: str | None = None
    hunks: list[Hunk] = []
    started = False
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("--- ") and nxt.startswith("+++ "):
            if started:
                files.append(FilePatch(old, new, tuple(hunks)))
            old, new, hunks, started = _strip(line[4:]), _strip(nxt[4:]), [], True
        elif started and (m := _HUNK.match(line)):
            hunks.append(Hunk(int(m.group(1)), line))
    if started:
        files.append(FilePatch(old, new, tuple(hunks)))
    if not files:
        raise WolfError(f"{path}: no unified diff found", hint="a patch needs ---/+++ lines")
    return Patch(path.name, path, tuple(files))


def read_series(series_file: Path, name: str, subdir: str) -> Series:
    """A quilt series file: one patch name a line, '#' comments, optional -pN (only -p1)."""
    patches: list[Patch] = []
    for n, raw in enumerate(series_file.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fname, *opts = line.split()
        if opts and opts != ["-p1"]:
            raise WolfError(
                f"{series_file}:{n}: option {' '.join(opts)} not supported",
                hint="patches are -p1 (a/ b/ prefixes)",
            )
        p = series_file.parent / fname
        if not p.is_file():
            raise WolfError(f"{series_file}:{n}: patch {fname} not found in {p.parent}")
        patches.append(parse_patch(p))
    return Series(name, subdir, tuple(patches))


def load(patches_dir: Path = PATCHES_DIR) -> list[Series]:
    """The OpenWrt series (patches/series) and each feed's (patches/feeds/<feed>/series)."""
    top = patches_dir / "series"
    if not top.is_file():
        raise WolfError(f"no series file at {top}", hint="give the patches directory")
    out = [read_series(top, "openwrt", "")]
    feeds = patches_dir / "feeds"
    if feeds.is_dir():
        for d in sorted(feeds.iterdir()):
            if (d / "series").is_file():
                out.append(read_series(d / "series", f"feeds/{d.name}", f"feeds/{d.name}"))
    return out


# --- staging: a copy of the touched files, where git apply runs ------------------------------


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


@contextlib.contextmanager
def _staging(root: Path, files: list[str]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="wolf-patch-") as tmp:
        stage = Path(tmp) / "t"
        stage.mkdir()
        for rel in files:
            src = root / rel
            if src.is_file():
                dst = stage / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        yield stage


def _git_apply(stage: Path, patch: Patch, *, reverse: bool, check: bool = False) -> None:
    argv = ["git", "apply", "-p1", "--whitespace=nowarn"]
    if reverse:
        argv.append("-R")
    if check:
        argv.append("--check")
    argv.append(str(patch.path))
    # The staging dir sits under a temp dir: stop git from finding an enclosing repository.
    env = {"GIT_CEILING_DIRECTORIES": str(stage.parent)}
    try:
        proc.run(argv, timeout=_GIT_TIMEOUT, cwd=stage, env=env)
    except CommandError as e:
        raise PatchConflict(patch, e.tail, reverse) from None


class PatchConflict(WolfError):
    """A patch does not apply: names the patch, the file and the hunk that failed."""

    def __init__(self, patch: Patch, output: list[str], reverse: bool = False) -> None:
        self.patch = patch
        self.file, self.hunk = _failed_hunk(patch, output)
        where = f"{self.file}, hunk #{self.hunk}" if self.hunk else self.file
        what = "does not revert" if reverse else "does not apply"
        reason = next((ln for ln in output if ln.startswith("error:")), "")
        super().__init__(
            f"patch {patch.name} {what} at {where}" + (f" ({reason})" if reason else ""),
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


def _stamp_path(root: Path) -> Path:
    return root / STAMP


def _read_stamp(root: Path) -> dict[str, object] | None:
    p = _stamp_path(root)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise WolfError(f"unreadable stamp {p}: {e}", hint="remove it and run --status") from None
    return data if isinstance(data, dict) else None


def _stamped_patches(stamp: dict[str, object]) -> list[tuple[str, str, str]]:
    """(name, sha256, text) of the patches a stamp says were applied."""
    items = stamp.get("patches", [])
    out: list[tuple[str, str, str]] = []
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict):
                out.append((str(it.get("name")), str(it.get("sha256")), str(it.get("text", ""))))
    return out


@contextlib.contextmanager
def _series_from_stamp(root: Path, series: Series) -> Iterator[Series]:
    """The series exactly as it was applied, rebuilt from the stamp's copies of the patches."""
    stamp = _read_stamp(root)
    assert stamp is not None
    with tempfile.TemporaryDirectory(prefix="wolf-stamped-") as tmp:
        patches = []
        for name, _, text in _stamped_patches(stamp):
            if not text:
                raise WolfError(f"{_stamp_path(root)}: no copy of {name}", hint="revert by hand")
            path = Path(tmp) / name
            path.write_text(text, encoding="utf-8")
            patches.append(parse_patch(path))
        yield Series(series.name, series.subdir, tuple(patches))


def _applies(root: Path, series: Series, *, reverse: bool) -> tuple[bool, PatchConflict | None]:
    """Whether the whole series applies (or reverts) on a staging copy; the tree is untouched."""
    order = list(reversed(series.patches)) if reverse else list(series.patches)
    with _staging(root, series.touched()) as stage:
        for p in order:
            try:
                _git_apply(stage, p, reverse=reverse)
            except PatchConflict as e:
                return False, e
    return True, None


def note_edits(root: Path, files: list[str]) -> list[str]:
    """Another tool of ours (`invoke sources`: a version or hash line of a Makefile) edited
    ``files`` of a patched tree: when the applied series still reverts cleanly from the
    edited files, its stamp takes their new contents, so the edit is not mistaken for a
    hand edit; when it no longer reverts, WolfError names the files. Returns the files the
    stamp now records anew."""
    stamp = _read_stamp(root)
    if stamp is None:
        return []
    recorded = stamp.get("files", {})
    assert isinstance(recorded, dict)
    touched = [f for f in files if f in recorded and _digest(root / f) != recorded[f]]
    if not touched:
        return []
    with _series_from_stamp(root, Series(str(stamp.get("series", "")), "", ())) as applied:
        reverts, err = _applies(root, applied, reverse=True)
    if not reverts:
        raise WolfError(
            f"editing {', '.join(touched)} broke the applied patch set: {err}",
            hint="revert the patch set, run `invoke sources`, then apply it again",
        )
    stamp["files"] = {**recorded, **{f: _digest(root / f) for f in touched}}
    tmp = _stamp_path(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, _stamp_path(root))
    return touched


def series_status(tree: Path, series: Series) -> SeriesStatus:
    root = tree / series.subdir
    if not root.is_dir():
        return SeriesStatus(series.name, str(root), "absent", detail="directory not present")
    stamp = _read_stamp(root)
    if stamp is not None:
        recorded = stamp.get("files", {})
        assert isinstance(recorded, dict)
        changed = [f for f, h in recorded.items() if _digest(root / f) != h]
        if changed:
            return SeriesStatus(
                series.name,
                str(root),
                "modified",
                [PatchState(p.name, "applied") for p in series.patches],
                detail=f"changed after patching: {', '.join(sorted(changed))}",
            )
        was = [(n, h) for n, h, _ in _stamped_patches(stamp)]
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


def _install(stage: Path, root: Path, files: list[str]) -> dict[str, str]:
    """Copy the staged result into the tree (each file atomically); return new file hashes."""
    hashes: dict[str, str] = {}
    for rel in files:
        src, dst = stage / rel, root / rel
        if src.is_file():
            h = _digest(src)
            assert h is not None
            hashes[rel] = h
            if _digest(dst) == h:
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.wolf-tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
        elif dst.exists():
            dst.unlink()
            _prune_empty(dst.parent, root)  # a revert leaves no directory a patch created
    return hashes


def _prune_empty(d: Path, root: Path) -> None:
    while d != root and d.is_relative_to(root) and d.is_dir() and not any(d.iterdir()):
        d.rmdir()
        d = d.parent


def _run_series(root: Path, series: Series, *, reverse: bool) -> dict[str, str]:
    order = list(reversed(series.patches)) if reverse else list(series.patches)
    files = series.touched()
    with _staging(root, files) as stage:
        for p in order:
            _git_apply(stage, p, reverse=reverse)  # raises PatchConflict; tree not touched yet
        return _install(stage, root, files)


def _write_stamp(root: Path, series: Series, hashes: dict[str, str]) -> None:
    data = {
        "series": series.name,
        # the text too: a tree patched with an older version of the series can still be reverted
        "patches": [
            {"name": p.name, "sha256": p.sha256(), "text": p.path.read_text(encoding="utf-8")}
            for p in series.patches
        ],
        "files": hashes,
    }
    tmp = _stamp_path(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, _stamp_path(root))


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
        root = tree / s.subdir
        if st.state == "absent":
            out.append(Outcome(s.name, str(root), "skipped", names))
        elif st.state == "applied":
            if _read_stamp(root) is None and not check:
                _write_stamp(root, s, {f: h for f in s.touched() if (h := _digest(root / f))})
            out.append(Outcome(s.name, str(root), "already-applied", names))
        elif check:
            out.append(Outcome(s.name, str(root), "would-apply", names))
        else:
            _write_stamp(root, s, _run_series(root, s, reverse=False))
            out.append(Outcome(s.name, str(root), "applied", names))
    return out


def revert(tree: Path, all_series: list[Series]) -> list[Outcome]:
    """Revert applied series (feeds first, then the tree); unapplied ones are left alone."""
    _need_tree(tree)
    out: list[Outcome] = []
    for s in reversed(all_series):
        st = series_status(tree, s)
        root = tree / s.subdir
        names = [p.name for p in s.patches]
        if st.state == "modified":
            raise WolfError(f"{s.name} in {root}: {st.detail}", hint="undo those edits first")
        if st.state == "outdated":
            with _series_from_stamp(root, s) as applied:
                _run_series(root, applied, reverse=True)
        elif st.state == "applied":
            _run_series(root, s, reverse=True)
        else:
            out.append(Outcome(s.name, str(root), "not-applied", names))
            continue
        with contextlib.suppress(FileNotFoundError):
            _stamp_path(root).unlink()
        out.append(Outcome(s.name, str(root), "reverted", names))
    return out


def status(tree: Path, all_series: list[Series]) -> list[SeriesStatus]:
    _need_tree(tree)
    return [series_status(tree, s) for s in all_series]


def _need_tree(tree: Path) -> None:
    if not tree.is_dir():
        raise WolfError(f"no OpenWrt tree at {tree}", hint="pass --tree PATH")
