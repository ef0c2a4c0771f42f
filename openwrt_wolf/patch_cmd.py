"""`invoke patch`: apply, check, revert or list the USE_WOLFSSL patch set on an OpenWrt tree."""

from __future__ import annotations

from pathlib import Path

from . import hosttools, patchset, term
from .errors import WolfError


def main(
    tree: str | None,
    *,
    check: bool = False,
    revert: bool = False,
    status: bool = False,
    patches: str | None = None,
) -> int:
    if sum((check, revert, status)) > 1:
        raise WolfError("--check, --revert and --status exclude each other", hint="pick one")
    if not tree:
        raise WolfError("no tree given", hint="pass --tree PATH (an OpenWrt v25.12.5 checkout)")
    hosttools.ensure("patch")
    root = Path(tree).expanduser().resolve()
    all_series = patchset.load(Path(patches) if patches else patchset.PATCHES_DIR)
    con = term.console()
    if status:
        for st in patchset.status(root, all_series):
            con.print(f"[bold]{st.series}[/] ({st.directory}): {st.state}")
            for ps in st.patches:
                con.print(f"  {ps.state:10} {ps.name}")
            if st.detail:
                con.print(f"  {st.detail}", markup=False)
        return 0
    if revert:
        outcomes = patchset.revert(root, all_series)
    else:
        outcomes = patchset.apply(root, all_series, check=check)
    for o in outcomes:
        con.print(f"{o.action:16} {o.series:16} {len(o.patches)} patches  {o.directory}")
    return 0
