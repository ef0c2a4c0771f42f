"""`invoke perf` behind tasks.py: parse the options, run the lab, print the tables from the
store."""

from __future__ import annotations

from .. import paths
from ..catalogue import releases
from ..errors import WolfError
from ..results import store
from ..term import console
from . import lab, report


def _list(value: str | None, every: tuple[str, ...], what: str) -> tuple[str, ...]:
    if not value or value.strip() == "all":
        return every
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    for v in items:
        if v not in every:
            raise WolfError(f"--{what} {v!r}: unknown", hint=f"choose from {', '.join(every)}, all")
    return items


def main(
    *,
    flavour: str | None = None,
    target: str | None = None,
    test: str | None = None,
    quick: bool = False,
    release: str | None = None,
    wolfssl_config: str = "minimal",
    ecc: str = "sp-p256",
    toolchain: str | None = None,
    clock: str = "cpu",
    store_dir: str | None = None,
    report_only: bool = False,
) -> None:
    if not target:
        raise WolfError("--target is required", hint=f"one of: {', '.join(lab.TARGETS)}")
    flavours = _list(flavour, lab.FLAVOURS, "flavour")
    if wolfssl_config not in ("minimal", "openwrt"):
        raise WolfError(f"--wolfssl-config {wolfssl_config!r}: expected minimal or openwrt")
    if ecc not in ("sp-p256", "generic"):
        raise WolfError(f"--ecc {ecc!r}: expected sp-p256 or generic")
    rel = releases.get(release)
    req = lab.Request(
        flavours=flavours, target=target, tests=_list(test, lab.TESTS, "test"), quick=quick,
        release=rel.name, wolfssl_config=wolfssl_config, ecc=ecc, toolchain=toolchain,
        clock=clock, store=store_dir,
    )  # fmt: skip
    err = console(stderr=True)
    if not report_only:
        lab.run(req, say=lambda line: err.print(line, markup=False, highlight=False))
    elif target not in lab.TARGETS:
        raise WolfError(f"unknown target {target!r}", hint=f"one of: {', '.join(lab.TARGETS)}")
    st = store.FileStore(paths.store_dir(store_dir))
    results = report.stored(st, target, flavours)
    out = console()
    if not results:
        raise WolfError(f"no perf records for {target} in {st.root}",
                        hint="run `invoke perf` without --report-only first")  # fmt: skip
    for t in report.tables(results, target):
        out.print(t)
    out.print(report.caption(results), markup=False, highlight=False)
