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


def defaults_main(tree: str | None, targets: str | None = None) -> int:
    """Default packages per profile: pristine tree vs. a patched copy, USE_WOLFSSL off and on."""
    import collections
    import tempfile

    from . import defaults

    if not tree:
        raise WolfError("no tree given", hint="pass --tree PATH (an OpenWrt v25.12.5 tree)")
    hosttools.ensure("patch")
    root = Path(tree).expanduser().resolve()
    chosen = tuple(t.strip() for t in targets.split(",")) if targets else defaults.DEFAULT_TARGETS
    con = term.console()
    with tempfile.TemporaryDirectory(prefix="wolf-defaults-") as tmp:
        with con.status("scanning the pristine tree"):
            before = defaults.collect(root, chosen)
        with con.status("scanning a patched copy"):
            patched = defaults.patched_copy(root, Path(tmp) / "patched")
            off = defaults.collect(patched, chosen, use_wolfssl=False)
            on = defaults.collect(patched, chosen, use_wolfssl=True)
    for t, td in before.targets.items():
        con.print(f"[bold]{t}[/]: {len(td.profiles)} profiles")
        con.print(f"  Default-Packages: {' '.join(td.default_packages)}", markup=False)
    off_changes = defaults.compare(before, off)
    con.print(f"USE_WOLFSSL off: {len(off_changes)} differences from the pristine tree")
    for c in off_changes:
        con.print(f"  {c.target} {c.profile or 'Default-Packages'}: -{c.removed} +{c.added}")
    on_changes = defaults.compare(before, on)
    con.print(f"USE_WOLFSSL on: {len(on_changes)} profiles change")
    groups = collections.Counter(
        (c.target, " ".join(c.removed), " ".join(c.added)) for c in on_changes
    )
    for (t, removed, added), n in sorted(groups.items()):
        con.print(f"  {t}: {n} profiles: -[{removed}] +[{added}]", markup=False)
    return 1 if off_changes else 0


def symbols_main(lib: str | None) -> int:
    """Check a built libwolfssl.so against the USE_WOLFSSL consumers' symbol lists."""
    from . import symbols

    if not lib:
        raise WolfError("no library given", hint="pass --lib PATH/libwolfssl.so")
    res = symbols.check(Path(lib).expanduser())
    con = term.console()
    con.print(f"{res.library}: {res.exported} exported symbols", markup=False)
    for r in res.results:
        tag = "ok" if not r.missing else ("MISSING" if r.required else "missing (informational)")
        con.print(f"  {r.consumer:22} {r.needed:4} needed  {tag}", markup=False)
        for name in r.missing:
            con.print(f"      {name}", markup=False)
    con.print("all required consumers resolved" if res.ok else "required symbols missing")
    return 0 if res.ok else 1
