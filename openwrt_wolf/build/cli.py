"""What `invoke build` prints: a table of the builds, their fit verdicts and records."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.table import Table

from .. import term
from ..catalogue import flavours, names, releases
from ..cli import comma_list
from ..errors import WolfError
from ..trust import escape
from .buildroot import Tree
from .driver import build
from .jobs import Options, Outcome
from .table import show


def options(
    *,
    flavour: str,
    device: str,
    release: str | None,
    backend: str | None,
    mirror: str | None,
    imagebuilder: str | None,
    sdk: str | None,
    tree: str | None,
    jobs: int,  # -j, checked by the task (cli.integer)
    force: bool,
    store: str | None,
    luci_https: bool,
    packages: str | None,
    files: str | None,
    feed: str | None = None,
    patches: str | None = None,
    sdk_ib: bool = False,
    stock: bool = False,
    sources: str | None = None,
    sources_url: str | None = None,
    allow: str | None = None,
) -> Options:
    """tasks.py's arguments as typed Options, for a local build (main) or a queue's."""
    from .sources import dl as srcmod

    def path(p: str | None) -> Path | None:
        return Path(p).expanduser() if p else None

    if files:  # FILES= reaches make's command line: checked before any work
        names.make_variable(f"FILES={Path(files).expanduser()}")
    opts = Options(
        flavour=flavour,
        device=device,
        release=release,
        backend=backend,
        mirror=mirror,
        imagebuilder=path(imagebuilder),
        sdk=path(sdk),
        tree=path(tree),
        jobs=jobs,
        force=force,
        store=store,
        luci_https=luci_https,
        packages=names.packages(packages),
        files=path(files),
        feed=path(feed),
        patches=path(patches),
        sdk_ib=sdk_ib,
        stock=stock,
        sources=tuple(Path(d).expanduser() for d in (sources or "").split(",") if d.strip()),
        sources_urls=_urls(sources_url),
        allow=srcmod.parse_allow(allow) if allow else (),
    )
    if allow and not (opts.sources or opts.sources_urls):
        raise WolfError("--allow is for what --sources/--sources-url give the base feed")
    return opts


def _urls(value: str | None) -> tuple[str, ...]:
    from ..trust import secrets

    urls = tuple(u.strip() for u in (value or "").split(",") if u.strip())
    for u in urls:
        secrets.one_token(u, "--sources-url")
    return urls


def main(
    opts: Options, *, retries: str | None = None, worker_timeout: str | None = None
) -> list[Outcome]:
    """The matrix built here; the builds' table (build/table.py)."""
    for name, v in (("--retries", retries), ("--worker-timeout", worker_timeout)):
        if v is not None:
            raise WolfError(f"{name} is for builds on a queue", hint="add --queue redis://...")
    outcomes = build(opts)
    show(outcomes)
    return outcomes


def render(
    *,
    flavour: str,
    device: str,
    release: str | None,
    what: str,
    luci_https: bool,
    packages: str | None,
    feed: str | None,
    imagebuilder: str | None,
) -> str:
    """A flavour's changes for one device as PACKAGES=, a diffconfig or feeds.conf.

    With --imagebuilder the profile's default packages come from its `make info`; without,
    every replacement of the flavour applies."""
    from .. import paths as pth
    from ..catalogue import devices as devs
    from . import packages as pk
    from .imagebuilder import ImageBuilder

    rel = releases.get(release).name
    dev = devs.resolve(device, rel)
    rules = pk.rules(flavours.get(flavour).name, rel)
    defaults = None
    if imagebuilder:
        log = pth.cache_dir() / "make-info.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        defaults = ImageBuilder(Path(imagebuilder).expanduser()).info(log).defaults(dev.profile)
    extra = names.packages(packages)
    c = pk.changes(rules, defaults, luci_https=luci_https, extra=extra)
    if what == "packages":
        value = pk.packages_value(c)
        if not value:  # a blank line on stdout read like a broken rendering
            term.console(stderr=True).print(
                f"note: {rules.flavour} changes no package of {dev.profile}: PACKAGES= is empty",
                markup=False,
            )
            return ""
        return value + "\n"
    if what == "diffconfig":
        return pk.diffconfig(
            c, flavour=rules.flavour, release=rel, target=dev.target, subtarget=dev.subtarget,
            profile=dev.profile,
        )  # fmt: skip
    if what == "buildroot":
        from . import buildroot

        brf = buildroot.flavour(rules.flavour)
        seed = buildroot.seed_changes(rules, brf, luci_https=luci_https, extra=extra,
                                      defaults=defaults)  # fmt: skip
        return buildroot.render_seed(seed, brf, dev, rel)
    if what == "feeds":
        return pk.feeds_conf(rel, rules.flavour, Path(feed).resolve() if feed else None)
    raise WolfError(f"--what {what!r}", hint="one of: packages, diffconfig, buildroot, feeds")


def refuse_tree_options(
    *,
    allow: str | None = None,
    configs: str | None = None,
    debian: bool | None = None,
    revert: bool = False,
    redo: str | None = None,
    device: str | None = None,
    flavour: str | None = None,
    packages: str | None = None,
    release: str | None = None,
    sdk_ib: bool = False,
) -> None:
    """Without --tree the sources task lists or fetches the pinned snapshots (host/cli.py):
    the options that fill a tree's dl/ are refused there in one line."""
    tree_only = {
        "--allow": allow, "--config": configs, "--no-debian": debian is False,
        "--revert": revert, "--redo": redo, "--device": device, "--flavour": flavour,
        "--packages": packages, "--release": release, "--sdk-ib": sdk_ib,
    }  # fmt: skip
    used = [opt for opt, v in tree_only.items() if v]
    if used:
        raise WolfError(f"{', '.join(used)}: only with --tree (filling a tree's dl/)")


def sources_main(
    *,
    tree: str | None = None,
    fetch: str | None = None,
    digest: str | None = None,
    dirs: str | None = None,
    urls: str | None = None,
    allow: str | None = None,
    configs: str | None = None,
    debian: bool | None = None,
    revert: bool = False,
    redo: str | None = None,
    device: str | None = None,
    flavour: str | None = None,
    packages: str | None = None,
    release: str | None = None,
    sdk_ib: bool = False,
) -> int:
    """`invoke sources --tree`: fill the tree's dl/, print what is not exact, write the
    substitutions file; 2 when a file is missing (or not allowed). With --device and --flavour
    the seeds are the ones `invoke build --tree` would write (the union of what each flavour
    needs)."""
    from .. import paths as pth
    from ..host import hosttools, upstream
    from .buildroot import Tree
    from .sources import dl, edit

    if tree is None:
        raise WolfError("sources: --tree is required here (the pinned snapshots are host's)")
    if fetch or digest:
        raise WolfError("--fetch and --digest are for the pinned snapshots, not with --tree")
    t = Tree(Path(tree))
    top = t.top
    log = pth.cache_dir() / "logs" / "sources.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    upstream.use_mirrors(comma_list(dirs), comma_list(urls))
    with t.lock():
        if revert:
            restored = edit.revert(top)
            term.console().print(f"restored {len(restored)} files of {top}", markup=False)
            left = edit.left_over(top)
            if left:  # a link, a special file or a path now a folder: not put back, said
                term.console().print(
                    f"left {len(left)} under {top / edit.ORIG_DIR} (a link, not a regular "
                    f"file, or its tree path is a folder): {', '.join(left)}", markup=False,
                )  # fmt: skip
            return 0
        if redo:
            redone = [n.strip() for n in redo.split(",") if n.strip()]
            put_back = dl.redo(top, redone)
            term.console().print(f"redo {', '.join(redone)}: {len(put_back)} files put back",
                                 markup=False)  # fmt: skip
        unlisted = dl.put_back_unlisted(top)
        if unlisted:
            term.console().print(f"put back {len(unlisted)} files an earlier run edited that its "
                                 f"substitutions file does not list: {', '.join(unlisted)}",
                                 markup=False)  # fmt: skip
        local = [d.resolve() for d in upstream.given_dirs()]
        for d in local:
            if not d.is_dir():
                raise WolfError(f"--sources {d} is not a directory")
        cfgs = [Path(p).expanduser() for p in (configs or "").split(",") if p.strip()]
        for c in cfgs:
            if not c.is_file():
                raise WolfError(f"--config {c} is not a file")
        hosttools.ensure("buildroot")  # the tree's make checks its prereqs (prereq-build.mk)
        with tempfile.TemporaryDirectory(prefix="wolf-seeds-") as tmp:
            if device or flavour:
                cfgs += _build_seeds(t, Path(tmp), device, flavour, packages, release, sdk_ib, log)
            needed = dl.list_for_tree(top, log, cfgs)
        subs = dl.fill(top, needed, local=local, urls=upstream.mirror_urls(),
                            allow=dl.parse_allow(allow), debian=debian is not False,
                            log=log)  # fmt: skip
        gone = dl.put_back_unlisted(top)  # edits of files this run no longer needs
        if gone:
            term.console().print(f"put back {len(gone)} files no longer needed: "
                                 f"{', '.join(gone)}", markup=False)  # fmt: skip
    show_substitutions(subs)
    missing = [f["file"] for f in subs.files if f["class"] == "missing"]
    con = term.console()
    con.print(f"substitutions file: {top / dl.SUBSTITUTIONS}", markup=False)
    if missing:
        con.print(f"missing ({len(missing)}): {', '.join(missing)}", markup=False)
        return 2
    return 0


def _build_seeds(
    tree: Tree, into: Path, device: str | None, flavour: str | None, packages: str | None,
    release: str | None, sdk_ib: bool, log: Path,
) -> list[Path]:  # fmt: skip
    """The .config seeds `invoke build --tree` writes for each device and flavour."""
    from ..catalogue import devices as devs
    from . import buildroot
    from . import packages as pk

    if not (device and flavour):
        raise WolfError("--device and --flavour go together (the seeds of those builds)")
    rel = releases.get(release).name
    extra = names.packages(packages)  # checked before anything reaches make
    out = []
    for dev in devs.resolve_many(device, rel):
        for fl in flavours.resolve_many(flavour):
            brf = buildroot.flavour(fl.name, sdk_ib=sdk_ib)
            seed, _ = tree.seed_for(dev, pk.rules(fl.name, rel), brf, rel, log, extra=extra)
            path = into / f"{dev.profile}-{fl.name}.config"
            path.write_text(seed)
            out.append(path)
    return out


def show_substitutions(subs: object) -> None:
    """The counts per class and a table of every file that is not exact."""
    from .sources.substitutions import Substitutions

    assert isinstance(subs, Substitutions)
    table = Table(title="sources that are not OpenWrt's exact files")
    for col in ("file", "class", "placed as", "version", "from", "note"):
        table.add_column(col, overflow="fold")
    for f in subs.not_exact():  # what the file says is shown, never read as markup
        cells = (f["file"], f["class"], f["placed"], f["version"][:12], f["origin"], f["note"])
        table.add_row(*(escape.markup(str(v)) for v in cells))
    con = term.console()
    con.print(table)
    con.print(" ".join(f"{k}: {v}" for k, v in subs.counts().items()), markup=False)
