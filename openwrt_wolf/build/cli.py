"""What `invoke build` prints: a table of the builds, their fit verdicts and records."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from .. import term
from ..errors import WolfError
from .driver import Options, Outcome, build


def _num(v: object) -> str:
    return f"{v:,}" if isinstance(v, int) else "–"


def main_args(
    *,
    flavour: str,
    device: str,
    release: str | None,
    backend: str | None,
    mirror: str | None,
    imagebuilder: str | None,
    sdk: str | None,
    tree: str | None,
    jobs: int | str,
    force: bool,
    store: str | None,
    luci_https: bool,
    packages: str | None,
    files: str | None,
) -> list[Outcome]:
    """tasks.py's arguments as typed Options."""

    def path(p: str | None) -> Path | None:
        return Path(p).expanduser() if p else None

    try:
        n = int(jobs)
    except ValueError:
        raise WolfError(f"-j {jobs!r} is not a number") from None
    return main(
        Options(
            flavour=flavour,
            device=device,
            release=release,
            backend=backend,
            mirror=mirror,
            imagebuilder=path(imagebuilder),
            sdk=path(sdk),
            tree=path(tree),
            jobs=n,
            force=force,
            store=store,
            luci_https=luci_https,
            packages=tuple(p.strip() for p in (packages or "").split(",") if p.strip()),
            files=path(files),
        )
    )


def main(opts: Options) -> list[Outcome]:
    outcomes = build(opts)
    table = Table(title=f"openwrt-wolf builds ({len(outcomes)})")
    for col in ("device", "flavour", "verdict", "image B", "checked B", "limit B",
                "headroom B", "", "record"):  # fmt: skip
        table.add_column(col, justify="right" if col.endswith(" B") else "left")
    for o in outcomes:
        r, fr = o.record, o.record.fit
        img = r.image()
        table.add_row(
            r.device,
            r.flavour,
            fr["verdict"] + (" (deleted)" if r.image_deleted else ""),
            _num(img["size"]) if img else "–",
            _num(fr["checked_size"]),
            _num(fr["limit"]),
            _num(fr["headroom"]),
            "cached" if o.cached else "built",
            str(o.path),
        )
    con = term.console()
    con.print(table)
    for o in outcomes:
        for w in o.record.openwrt_warnings:
            con.print(f"{o.record.device} {o.record.flavour}: OpenWrt: {w}")
        img = o.record.image()
        if img:
            con.print(f"{o.record.device} {o.record.flavour}: {Path(img['path'])}")
    return outcomes
