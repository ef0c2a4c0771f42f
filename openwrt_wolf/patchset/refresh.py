"""`invoke patch --refresh`: re-generate a patch series against another OpenWrt tree with quilt.

Each series (the tree's, and each feed's whose directory exists) is pushed patch by patch with
quilt in a staging copy of only the files it touches, as OpenWrt's own `make
package/x/refresh` does; every applied patch is written back with `quilt refresh`, so offsets
and fuzz disappear from the new series. What quilt reported per hunk (offset, fuzz, failed) is
the report. The tree is never written.

The staging copy is made as for applying (patchset/staging.py: no link of the tree's followed)
but holds no link at all: quilt's backup copies and its diff follow links, so a link in the
tree, or one a patch creates, is refused before quilt refresh could write its target's bytes
into a patch. GNU patch is told the patches are unified diffs (no ed script runs), and the
refreshed files are written as new files renamed over the old ones (outputs.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import proc
from ..errors import CommandError, WolfError
from ..files import outputs
from . import series as patchset
from . import staging

_QUILT_TIMEOUT = 120.0
# GNU patch, through quilt: "Hunk #2 succeeded at 416 with fuzz 1 (offset -7 lines)."
_HUNK_OK = re.compile(
    r"^Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?\.$"
)
_HUNK_FAILED = re.compile(r"^Hunk #(\d+) FAILED at (\d+)\.$")
_FILE = re.compile(r"^patching file (.+)$")
_REFRESH_ARGS = ("-p", "ab", "--no-timestamps", "--no-index")


@dataclass
class HunkNote:
    file: str
    hunk: int
    line: int
    offset: int = 0
    fuzz: int = 0
    failed: bool = False


@dataclass
class PatchRefresh:
    series: str
    name: str
    state: str  # clean | offset | fuzz | failed | not tried
    hunks: list[HunkNote] = field(default_factory=list)


@dataclass
class RefreshReport:
    tree: str
    source: str
    into: str
    patches: list[PatchRefresh]

    @property
    def ok(self) -> bool:
        return all(p.state not in ("failed", "not tried") for p in self.patches)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def parse_push(output: str) -> list[HunkNote]:
    """Hunks GNU patch reported with an offset, fuzz or failure (clean hunks say nothing)."""
    notes: list[HunkNote] = []
    current = "?"
    for line in output.splitlines():
        line = line.strip()
        if m := _FILE.match(line):
            current = m.group(1)
        elif m := _HUNK_OK.match(line):
            notes.append(
                HunkNote(
                    current,
                    int(m.group(1)),
                    int(m.group(2)),
                    offset=int(m.group(4) or 0),
                    fuzz=int(m.group(3) or 0),
                )
            )
        elif m := _HUNK_FAILED.match(line):
            notes.append(HunkNote(current, int(m.group(1)), int(m.group(2)), failed=True))
    return notes


def _state(notes: list[HunkNote]) -> str:
    if any(n.failed for n in notes):
        return "failed"
    if any(n.fuzz for n in notes):
        return "fuzz"
    return "offset" if notes else "clean"


def _quilt(stage: Path, *args: str, check: bool = True) -> proc.Completed:
    # --unified: GNU patch reads nothing else of a patch, so never an ed script
    env = {"QUILT_PATCHES": "patches", "QUILT_PC": ".pc", "QUILT_PATCH_OPTS": "--unified"}
    argv = ["quilt", "--quiltrc", "-", *args]  # no ~/.quiltrc: same output for everyone
    return proc.run(argv, timeout=_QUILT_TIMEOUT, cwd=stage, env=env, check=check)


def _no_links(stage: Path, series: patchset.Series, patch: str) -> None:
    """quilt refresh diffs the files as they are in the stage: a link there would put its
    target's bytes into the refreshed patch."""
    for rel in series.touched():
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.lstat(stage / rel).st_mode):
                raise WolfError(f"{patch} makes {rel} a symbolic link",
                                hint="--refresh diffs regular files only")  # fmt: skip


def _refresh_series(root: Path, series: patchset.Series, out_dir: Path) -> list[PatchRefresh]:
    results = [PatchRefresh(series.name, p.name, "not tried") for p in series.patches]
    for rel in series.touched():
        if rel.split("/")[0] in ("patches", ".pc"):  # quilt's own, in the stage
            raise WolfError(f"{series.name}: {rel}: --refresh cannot patch a tree's "
                            "top-level patches/ or .pc/")  # fmt: skip
    with patchset.staged(root, series, links=False) as stage:
        for p in series.patches:
            (stage / "patches" / p.name).parent.mkdir(parents=True, exist_ok=True)
            (stage / "patches" / p.name).write_bytes(p.data)  # the bytes that were checked
        (stage / "patches" / "series").write_text("".join(f"{p.name}\n" for p in series.patches))
        for res, p in zip(results, series.patches, strict=True):
            push = _quilt(stage, "push", check=False)
            res.hunks = parse_push(push.output)
            res.state = _state(res.hunks)
            if push.returncode != 0:
                res.state = "failed"
                break
            _no_links(stage, series, p.name)
            try:
                _quilt(stage, "refresh", *_REFRESH_ARGS)
            except CommandError as e:
                raise WolfError(f"quilt refresh of {p.name} failed: {e.tail}") from None
            outputs.replace_bytes(out_dir / p.name, (stage / "patches" / p.name).read_bytes())
    return results


def refresh(
    tree: Path, all_series: list[patchset.Series], source: Path, into: Path
) -> RefreshReport:
    """Push and refresh every series against tree; write the refreshed series under into."""
    if not (tree / "include" / "target.mk").is_file():
        raise WolfError(f"{tree} is not an OpenWrt tree (no include/target.mk)", hint="pass --tree")
    report: list[PatchRefresh] = []
    for series in all_series:
        out_dir = into / series.subdir if series.subdir else into
        out_dir.mkdir(parents=True, exist_ok=True)
        root = staging.series_root(tree, series.subdir)
        if root is None:
            # feed not installed in this tree: carry the series over unchanged
            for p in series.patches:
                outputs.replace_bytes(out_dir / p.name, p.data)
                report.append(PatchRefresh(series.name, p.name, "copied"))
        else:
            done = _refresh_series(root, series, out_dir)
            report.extend(done)
            if any(p.state in ("failed", "not tried") for p in done):
                break  # no series file for a half-refreshed series
        head = f"# {series.name} series, refreshed with quilt against {tree}\n"
        text = head + "".join(f"{p.name}\n" for p in series.patches)
        outputs.replace_bytes(out_dir / "series", text.encode())
    return RefreshReport(str(tree), str(source), str(into), report)
