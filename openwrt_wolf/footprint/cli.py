"""`invoke footprint` behind tasks.py: parse the comma lists, run the lab, print the table."""

from __future__ import annotations

from ..catalogue import releases
from ..errors import WolfError
from ..host import upstream
from ..results.footprint import Footprint
from ..term import console
from . import components, lab, report, spec


def _list(value: str | None, default: tuple[str, ...], every: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        return default
    if value.strip() == "all":
        return every
    return tuple(v.strip() for v in value.split(",") if v.strip())


def configs_of(libraries: tuple[str, ...]) -> tuple[str, ...]:
    """What --config all means: every config the named libraries have (one library: its own,
    so `--library wolfssl --config all` is openwrt and minimal, not an error for 'small')."""
    known = set(spec.LIBRARIES)
    names = [n for n in libraries if n in known]  # an unknown one fails in the lab, one line
    return tuple(dict.fromkeys(c for n in names for c in spec.get_library(n).configs()))


def main(
    *,
    arch: str = "mips_24kc",
    release: str | None = None,
    library: str | None = None,
    config: str | None = None,
    ecc: str | None = None,
    toolchain: str | None = None,
    smoke: bool = False,
    sources: str | None = None,
    mirror: str | None = None,
    rebuild: bool = False,
    markdown: bool = False,
    store: str | None = None,
    parallel: int = 2,
    version: str | None = None,
    stack: bool = False,
    component: str | None = None,
) -> list[Footprint]:
    upstream.use_mirrors(_list(sources, (), ()))  # the stack's upstream sources, too
    if stack:
        stack_main(arch=arch, toolchain=toolchain, markdown=markdown, store=store)
        return []
    rel = releases.get(release)
    libraries = _list(library, spec.LIBRARIES, spec.LIBRARIES)
    req = lab.Request(
        arch=arch,
        release=rel.name,
        libraries=libraries,
        configs=_list(config, ("openwrt",), configs_of(libraries)),
        ecc=_eccs(ecc),
        toolchain=toolchain,
        smoke=smoke,
        sources=_list(sources, (), ()),
        mirrors=_list(mirror, (), ()),
        rebuild=rebuild,
        store=store,
        parallel=parallel,
        versions=_versions(version),
        components=_list(component, (), components.names()),
    )
    outcome = lab.run(req)
    fps = outcome.footprints
    out = console()
    for note in req.notes:
        out.print(f"note: {note}")
    if fps and markdown:
        out.print(report.markdown(fps), markup=False, highlight=False)
    elif fps:
        out.print(report.table(fps, f"TLS libraries for {arch}, OpenWrt {rel.name} settings"))
    if fps:
        out.print(report.caption(fps), markup=False, highlight=False)
    if any(fp.components for fp in fps):
        if markdown:
            out.print(report.stack_markdown(fps), markup=False, highlight=False)
        else:
            out.print(report.stack_table(fps, f"TLS stack per flavour, {arch}"))
    for fp in fps:
        if fp.smoke is not None and not fp.smoke.ok:
            bad = {k: v for k, v in fp.smoke.checks.items() if v != "ok"}
            out.print(f"smoke FAILED for {fp.title} {fp.config}: {bad}", markup=False)
    if outcome.errors:
        raise outcome.errors[0]  # the other builds are done, stored and cached
    return fps


def _eccs(value: str | None) -> tuple[str, ...]:
    """--ecc checked against the ECC choices data/footprint/ offers, before any work: an
    unknown one would otherwise be ignored for configs without a choice and build them all."""
    choices = spec.ecc_names()
    eccs = _list(value, (), tuple(choices))
    bad = [e for e in eccs if e not in choices]
    if bad or (value is not None and value.strip() and not eccs):
        shown = ", ".join(repr(b) for b in bad) or repr(value)
        raise WolfError(
            f"--ecc {shown}: not an ECC choice", hint=f"one of: {', '.join(choices)}, all"
        )
    return eccs


def _versions(value: str | None) -> tuple[tuple[str, str], ...]:
    """'wolfssl=5.9.2,mbedtls=3.6.7' -> (("wolfssl", "5.9.2"), ("mbedtls", "3.6.7"))."""
    out = []
    for item in _list(value, (), ()):
        lib, sep, ver = item.partition("=")
        if not sep or lib not in spec.LIBRARIES or not ver:
            raise WolfError(
                f"--version {item!r}: expected LIBRARY=VERSION",
                hint=f"e.g. wolfssl=5.9.2; libraries: {', '.join(spec.LIBRARIES)}",
            )
        out.append((lib, ver))
    return tuple(out)


def stack_main(*, arch: str, toolchain: str | None, markdown: bool, store: str | None) -> None:
    """`invoke footprint --stack`: the whole TLS stack per flavour in one table."""
    from . import stack, userland

    out, progress = console(), console(stderr=True)  # progress apart: --markdown stays a table
    stacks = []
    for name in userland.FLAVOURS:
        progress.print(f"building the {name} stack for {arch} (cached after the first run) ...",
                       markup=False)  # fmt: skip
        stacks.append(stack.collect(name, arch, toolchain=toolchain, store_dir=store))
    title = f"the whole TLS stack per flavour, {arch}, OpenWrt 25.12.5 settings"
    if markdown:
        out.print(stack.markdown(stacks), markup=False, highlight=False)
    else:
        out.print(stack.table(stacks, title))
    for line in stack.reference_notes(stacks):
        out.print(f"note: {line}", markup=False, highlight=False)
