"""`invoke size-report` and `invoke history`: build the model, render it, print it or write it
atomically; --fail-on verdicts go to stderr and make the exit status 1."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import term
from ..catalogue import releases
from ..errors import WolfError
from ..results.store import write_atomic
from . import history, sizereport
from .render import FORMATS, render


def _emit(text: str, fmt: str, output: str | None) -> None:
    if output:
        write_atomic(Path(output), text)
        term.console(stderr=True).print(f"wrote {output}", markup=False)
    else:
        sys.stdout.write(text)


def _check_output(path: Path) -> None:
    """Refuse an --output that cannot become a file before measuring anything."""
    if path.is_dir():
        raise WolfError(
            f"--output {path} is a directory", hint=f"give a file name, e.g. {path / 'report.md'}"
        )
    if not path.parent.is_dir():
        raise WolfError(f"--output {path}: directory {path.parent} does not exist")


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
) -> None:
    if fmt not in FORMATS:
        raise WolfError(f"unknown --format {fmt!r}", hint=f"one of: {', '.join(FORMATS)}")
    if release is not None:
        releases.get(release)  # unknown: one line naming the known ones, not "nothing to report"
    if output:
        _check_output(Path(output))
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
        )
    for dev in report.devices:
        con.print(f"device: {dev.profile} ({dev.title})", markup=False, highlight=False)
    if output:
        _emit(render(report, fmt, width=200), fmt, output)
    else:
        width = None if sys.stdout.isatty() else 200
        _emit(render(report, fmt, width=width), fmt, None)
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
    h = history.build(store=store, device=device, flavour=flavour, release=release)
    width = 200 if output or not sys.stdout.isatty() else None
    _emit(render_history(h, fmt, width=width), fmt, output)
