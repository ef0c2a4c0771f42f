"""`invoke size-report`: build the report, render it, print it or write it atomically."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import term
from ..results.store import write_atomic
from . import sizereport
from .render import FORMATS, render


def main(
    *,
    store: str | None,
    from_dirs: list[str],
    device: str | None,
    flavour: str | None,
    release: str | None,
    fmt: str,
    output: str | None,
    packages: int = 0,
) -> None:
    if fmt not in FORMATS:
        from ..errors import WolfError

        raise WolfError(f"unknown --format {fmt!r}", hint=f"one of: {', '.join(FORMATS)}")
    con = term.console(stderr=True)
    with con.status("measuring artifacts (xz -9e of the TLS libraries; cached after)"):
        report = sizereport.build(
            store=store,
            from_dirs=from_dirs,
            device=device,
            flavour=flavour,
            release=release,
            top_packages=packages,
        )
    for dev in report.devices:
        con.print(f"device: {dev.profile} ({dev.title})", markup=False, highlight=False)
    if output:
        text = render(report, "terminal" if fmt == "terminal" else fmt, width=200)
        write_atomic(Path(output), text)
        con.print(f"wrote {output}", markup=False)
    else:
        width = None if sys.stdout.isatty() else 200
        sys.stdout.write(render(report, fmt, width=width))
