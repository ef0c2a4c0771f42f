"""`invoke patch`: apply, check, revert or list the USE_WOLFSSL patch set on an OpenWrt tree."""

from __future__ import annotations

from pathlib import Path

from .. import term
from ..catalogue import releases
from ..errors import WolfError
from ..host import hosttools
from . import series


def patches_dir(patches: str | None, release: str | None) -> Path:
    """--patches DIR, else the series data/releases.toml names for --release (default 25.12.5)."""
    if patches and release:
        raise WolfError("--patches and --release exclude each other", hint="pick one")
    if patches:
        return Path(patches).expanduser().resolve()
    return releases.get(release).patches_dir()


def main(
    tree: str | None,
    *,
    check: bool = False,
    revert: bool = False,
    status: bool = False,
    patches: str | None = None,
    release: str | None = None,
    refresh: bool = False,
    into: str | None = None,
) -> int:
    if sum((check, revert, status, refresh)) > 1:
        raise WolfError(
            "--check, --revert, --status and --refresh exclude each other", hint="pick one"
        )
    if into and not refresh:
        raise WolfError("--into goes with --refresh", hint="add --refresh")
    if not tree:
        raise WolfError("no tree given", hint="pass --tree PATH (an OpenWrt checkout)")
    root = Path(tree).expanduser().resolve()
    if not root.is_dir():  # the paths before a tool is installed
        raise WolfError(f"no OpenWrt tree at {root}", hint="pass --tree PATH")
    source = patches_dir(patches, release)
    all_series = series.load(source)
    hosttools.ensure("patch")
    con = term.console()
    if refresh:
        return _refresh(
            root, all_series, source, Path(into).expanduser().resolve() if into else source
        )
    if status:
        for st in series.status(root, all_series):
            con.print(f"[bold]{st.series}[/] ({st.directory}): {st.state}")
            for ps in st.patches:
                con.print(f"  {ps.state:10} {ps.name}")
            if st.detail:
                con.print(f"  {st.detail}", markup=False)
        return 0
    if revert:
        outcomes = series.revert(root, all_series)
    else:
        outcomes = series.apply(root, all_series, check=check)
    for o in outcomes:
        con.print(f"{o.action:16} {o.series:16} {len(o.patches)} patches  {o.directory}")
    return 0


def _refresh(root: Path, all_series: list[series.Series], source: Path, into: Path) -> int:
    from . import refresh

    con = term.console()
    with con.status(f"quilt push/refresh of {source} against {root}"):
        rep = refresh.refresh(root, all_series, source, into)
    for p in rep.patches:
        con.print(f"{p.state:10} {p.series:12} {p.name}", markup=False)
        for h in p.hunks:
            what = "FAILED" if h.failed else f"offset {h.offset:+d}, fuzz {h.fuzz}"
            con.print(f"    {h.file} hunk #{h.hunk} at {h.line}: {what}", markup=False)
    con.print(f"refreshed series written to {into}" if rep.ok else "stopped at a failing patch")
    if not rep.ok:
        bad = next(p for p in rep.patches if p.state == "failed")
        raise WolfError(
            f"{bad.name} does not apply to {root}",
            hint="fix its rejected hunks by hand (quilt push -f; edit; quilt refresh), then rerun",
        )
    return 0


RELEASE = "25.12.5"  # the release the series is written against


def defaults_main(tree: str | None, targets: str | None = None, store: str | None = None) -> int:
    """Default packages per profile: pristine tree vs. a patched copy, USE_WOLFSSL off and on."""
    import collections
    import hashlib
    import tempfile
    from dataclasses import asdict

    from .. import paths
    from ..results.store import FileStore, Record
    from . import defaults

    if not tree:
        raise WolfError("no tree given", hint="pass --tree PATH (an OpenWrt v25.12.5 tree)")
    root = Path(tree).expanduser().resolve()
    if not root.is_dir():  # before a tool is installed
        raise WolfError(f"no OpenWrt tree at {root}", hint="pass --tree PATH")
    hosttools.ensure("patch")
    chosen = tuple(t.strip() for t in targets.split(",")) if targets else defaults.DEFAULT_TARGETS
    con = term.console()
    with (
        tempfile.TemporaryDirectory(prefix="wolf-defaults-") as tmp,
        con.status("scanning the pristine tree and a patched copy (OpenWrt's target scan)"),
    ):
        cmp = defaults.compare_tree(root, chosen, Path(tmp))
    con.print(f"{len(cmp.targets)} targets, {cmp.profiles} profiles")
    if len(cmp.targets) <= 5:
        for t, pkgs in cmp.default_packages.items():
            con.print(f"  {t} Default-Packages: {' '.join(pkgs)}", markup=False)
    con.print(f"USE_WOLFSSL off: {len(cmp.off_changes)} differences from the pristine tree")
    for c in cmp.off_changes:
        con.print(f"  {c.target} {c.profile or 'Default-Packages'}: -{c.removed} +{c.added}")
    con.print(f"USE_WOLFSSL on: {len(cmp.on_changes)} profiles change")
    groups = collections.Counter(
        (c.target, " ".join(c.removed), " ".join(c.added)) for c in cmp.on_changes
    )
    for (t, removed, added), n in sorted(groups.items()):
        con.print(f"  {t}: {n} profiles: -[{removed}] +[{added}]", markup=False)
    key = hashlib.sha256(f"{root}|{','.join(cmp.targets)}".encode()).hexdigest()[:16]
    rec = Record("patch-defaults", key, RELEASE, None, "wolfssl", asdict(cmp))
    con.print(f"stored {FileStore(paths.store_dir(store)).put(rec)}", markup=False)
    return 1 if cmp.off_changes else 0


def symbols_main(lib: str | None, store: str | None = None) -> int:
    """Check a built libwolfssl.so against the USE_WOLFSSL consumers' symbol lists."""
    import hashlib

    from .. import paths
    from ..results.store import FileStore, Record
    from . import symbols

    if not lib:
        raise WolfError("no library given", hint="pass --lib PATH/libwolfssl.so")
    path = Path(lib).expanduser().resolve()
    res = symbols.check(path)
    con = term.console()
    con.print(f"{res.library}: {res.exported} exported symbols", markup=False)
    for r in res.results:
        tag = "ok" if not r.missing else ("MISSING" if r.required else "missing (informational)")
        con.print(f"  {r.consumer:22} {r.needed:4} needed  {tag}", markup=False)
        for name in r.missing:
            con.print(f"      {name}", markup=False)
    con.print("all required consumers resolved" if res.ok else "required symbols missing")
    key = hashlib.sha256(symbols.library_bytes(path)).hexdigest()[:16]
    rec = Record("wolfssl-symbols", key, RELEASE, None, "wolfssl", res.to_dict())
    con.print(f"stored {FileStore(paths.store_dir(store)).put(rec)}", markup=False)
    return 0 if res.ok else 1


def consumers_main(
    wolfssl: str | None,
    *,
    ustream: str | None = None,
    hostap: str | None = None,
    openwrt: str | None = None,
    libubox: str | None = None,
    write: bool = False,
) -> int:
    """Re-derive data/wolfssl_consumers.toml from the consumers' sources."""
    from . import consumers, symbols

    if not wolfssl:
        raise WolfError("no wolfSSL tree given", hint="pass --wolfssl DIR (configured sources)")
    given = {"--wolfssl": wolfssl, "--ustream": ustream, "--hostap": hostap,
             "--openwrt": openwrt, "--libubox": libubox}  # fmt: skip
    for opt, v in given.items():  # the paths before the cross compiler is installed
        if v and not Path(v).expanduser().is_dir():
            raise WolfError(f"{opt} {v} is not a directory")
    hosttools.ensure(["mips-linux-gnu-gcc"])
    roots = {
        k: Path(v).expanduser().resolve()
        for k, v in (("ustream", ustream), ("hostap", hostap), ("openwrt", openwrt))
        if v
    }
    ubox = Path(libubox).expanduser().resolve() if libubox else None
    results = consumers.derive(roots, Path(wolfssl).expanduser().resolve(), libubox=ubox)
    con = term.console()
    for r in results:
        con.print(
            f"{r.consumer:22} {len(r.symbols):4} symbols  +{len(r.added)} -{len(r.removed)}",
            markup=False,
        )
        for n in r.added:
            con.print(f"    + {n}", markup=False)
        for n in r.removed:
            con.print(f"    - {n}", markup=False)
    if write:
        consumers.write(results)
        con.print(f"wrote {symbols.CONSUMERS_FILE}", markup=False)
    return 0
