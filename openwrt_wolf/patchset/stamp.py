"""The stamp a series leaves in the directory it patched (``.wolf-patches.json``): the patches
applied (name, sha256, a copy of the text) and the digest of every file they left.

A stamp is read like any file we did not write in this run (a tree comes from elsewhere):
through trust/untrusted.py (a regular file, bounded, JSON whose numbers fit, typed), its names
checked as patch names and its files as plain paths in the tree, and a copy of a patch used
only when it matches its sha256. A stamp that is a link is refused, and one is written by
outputs.py as a new file renamed over the old (a link planted at its name or at any
temporary name is never followed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WolfError
from ..files import outputs
from ..trust import untrusted
from . import diff, staging

NAME = ".wolf-patches.json"
MAX_STAMP = untrusted.MAX_TEXT  # the patch texts it copies: the set's are 65 kB in all


@dataclass(frozen=True)
class StampedPatch:
    name: str
    sha256: str
    text: str = ""


@dataclass(frozen=True)
class Stamp:
    series: str
    patches: list[StampedPatch] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def path(root: Path) -> Path:
    return root / NAME


def read(root: Path) -> Stamp | None:
    """The stamp of the series applied at root; None when there is none."""
    p = path(root)
    where = f"patch stamp {p}"
    st = staging.lstat(p, where)
    if st is None:
        return None
    hint = "remove it and run --status"
    if stat.S_ISLNK(st.st_mode):
        raise WolfError(f"{where} is a symbolic link, not a stamp we wrote", hint=hint)
    doc = untrusted.load_json(p, "patch stamp", MAX_STAMP, hint=hint)
    stamp = untrusted.typed(Stamp, doc, where)
    for i, sp in enumerate(stamp.patches):
        diff.patch_name(sp.name, f"{where}: field patches[{i}].name")
    for f in stamp.files:
        diff.tree_path(f, f"{where}: field files")
    return stamp


def patches(stamp: Stamp, root: Path) -> tuple[diff.Patch, ...]:
    """The patches exactly as they were applied, from the stamp's copies; each read and
    checked like a patch of a series, never written anywhere."""
    where = f"patch stamp {path(root)}"
    out = []
    for sp in stamp.patches:
        if not sp.text:
            raise WolfError(f"{where}: no copy of {sp.name}", hint="revert by hand")
        try:
            data = sp.text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise WolfError(f"{where}: the copy of {sp.name} is not text we wrote") from None
        if hashlib.sha256(data).hexdigest() != sp.sha256:
            raise WolfError(f"{where}: the copy of {sp.name} does not match its sha256",
                            hint="revert by hand")  # fmt: skip
        if len(data) > diff.MAX_PATCH:
            raise WolfError(f"{where}: the copy of {sp.name} is bigger than a patch")
        out.append(diff.parse(data, sp.name, f"{where}: the copy of {sp.name}"))
    return tuple(out)


def write(root: Path, series: str, applied: tuple[diff.Patch, ...], files: dict[str, str]) -> None:
    stamp = {
        "series": series,
        # the text too: a tree patched with an older version of the series can still be reverted
        "patches": [{"name": p.name, "sha256": p.sha256(), "text": p.text} for p in applied],
        "files": files,
    }
    outputs.replace_bytes(path(root), (json.dumps(stamp, indent=1) + "\n").encode())


def remove(root: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path(root))
