"""`invoke size-report` and `invoke history`: build the model, render it, print it or write it
atomically; --fail-on verdicts go to stderr and make the exit status 1."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import paths, term
from ..catalogue import releases
from ..errors import WolfError
from ..files import outputs
from . import history, sizereport
from .render import FORMATS, render


def _inputs(store: str | None, from_dirs: list[str] | None = None) -> list[Path]:
    """What a report reads, which its --output must not overwrite: the store's records and
    the output directories measured."""
    return [paths.store_dir(store), *(sizereport.parse_from(d)[1] for d in from_dirs or [])]


def _emit(text: str, fmt: str, output: str | None, inputs: list[Path]) -> None:
    if output:
        outputs.write_text(output, text, inputs=inputs)
        term.console(stderr=True).print(f"wrote {output}", markup=False)
    else:
        sys.stdout.write(text)


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
    baseline: str | None = None,
    fail_on: list[str] | None = None,
    sort: str = "headroom",
    stock: bool = False,
) -> None:
    if fmt not in FORMATS:
        raise WolfError(f"unknown --format {fmt!r}", hint=f"one of: {', '.join(FORMATS)}")
    if release is not None:
        releases.get(release)  # unknown: one line naming the known ones, not "nothing to report"
    inputs = _inputs(store, from_dirs)
    if output:
        outputs.check(output, inputs=inputs)  # before anything is measured
    con = term.console(stderr=True)
    with con.status("measuring artifacts (xz -9e of the TLS libraries; cached after)"):
        report = sizereport.build(
            store=store,
            from_dirs=from_dirs,
            device=device,
            flavour=flavour,
            release=release,
            top_packages=packages,
            baseline=baseline,
            fail_on=fail_on,
            sort=sort,
            stock=stock,
        )
    for dev in report.devices:
        con.print(f"device: {dev.profile} ({dev.title})", markup=False, highlight=False)
    if output:
        _emit(render(report, fmt, width=200), fmt, output, inputs)
    else:
        width = None if sys.stdout.isatty() else 200
        _emit(render(report, fmt, width=width), fmt, None, inputs)
    from .render.cells import gate_lines

    for line in gate_lines(report):
        con.print(line, markup=False, highlight=False, soft_wrap=True)  # one line each in logs
    if report.broken:
        raise SystemExit(1)


def history_main(
    *,
    store: str | None,
    device: str | None,
    flavour: str | None,
    release: str | None,
    fmt: str,
    output: str | None,
) -> None:
    from .render.history import FORMATS as HFORMATS
    from .render.history import render_history

    if fmt not in HFORMATS:
        raise WolfError(f"unknown --format {fmt!r}", hint=f"one of: {', '.join(HFORMATS)}")
    inputs = _inputs(store)
    if output:
        outputs.check(output, inputs=inputs)
    h = history.build(store=store, device=device, flavour=flavour, release=release)
    width = 200 if output or not sys.stdout.isatty() else None
    _emit(render_history(h, fmt, width=width), fmt, output, inputs)
