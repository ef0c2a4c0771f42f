"""`invoke perf` behind tasks.py: parse the options, run the lab, print the tables from the
store."""

from __future__ import annotations

from typing import Any

from .. import paths
from ..catalogue import releases
from ..errors import WolfError
from ..footprint import spec
from ..results import store
from ..results.perf import (
    LAB_ARCH,
    Handshakes,
    HeapUse,
    WifiConnections,
    lab_variant,
    place_label,
)
from ..term import console
from . import cpu_crypto as cpu_crypto_switch
from . import lab, tables


def _list(
    value: str | None, every: tuple[str, ...], what: str, named: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The names given; "all" (or none) is `every`; `named` ones run only when named."""
    if not value or value.strip() == "all":
        return every
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    for v in items:
        if v not in every + named:
            choose = ", ".join(every + named)
            raise WolfError(f"--{what} {v!r}: unknown", hint=f"choose from {choose}, all")
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
    host: str | None = None,
    ssh: dict[str, Any] | None = None,
    image: str | None = None,
    initrd: str | None = None,
    append: str | None = None,
    rootfs: str | None = None,
    packages: str | None = None,
    wpad_build: str | None = None,
    arch: str | None = None,
    cpu_crypto: str | None = None,
) -> None:
    if not target:
        raise WolfError("--target is required", hint=f"one of: {', '.join(lab.TARGETS)}")
    ssh = {k: v for k, v in (ssh or {}).items() if v not in (None, False)}
    login = None
    if target == "router" and not report_only:
        if not host or not host.strip():
            raise WolfError("--target router needs --host ADDR",
                            hint="the router's address, with --key or --password")  # fmt: skip
        from ..targets.router.login import login_from_cli

        login = login_from_cli(host.strip(), **ssh)
    elif host is not None or ssh:
        given = ", ".join(["--host"] * (host is not None) +
                          [f"--{k.replace('_', '-')}" for k in ssh])  # fmt: skip
        raise WolfError(f"{given}: only with --target router")
    vm = {"--image": image, "--initrd": initrd, "--append": append}
    if target != "vm" and any(v is not None for v in vm.values()):
        given = ", ".join(k for k, v in vm.items() if v is not None)
        raise WolfError(f"{given}: only with --target vm (the malta VM boots it)")
    arch = _arch(arch, target)
    cpu_crypto = cpu_crypto_switch.check(cpu_crypto, arch)
    flavours = _list(flavour, lab.FLAVOURS, "flavour")
    tests = _list(test, lab.TESTS, "test", lab.OPT_IN)
    wanted = {"--rootfs": rootfs, "--packages": packages, "--wpad-build": wpad_build}
    tests = _image_tests(target, image, tests, flavours, wanted)
    if wolfssl_config not in ("minimal", "openwrt"):
        raise WolfError(f"--wolfssl-config {wolfssl_config!r}: expected minimal or openwrt")
    if ecc not in ("sp-p256", "generic"):
        raise WolfError(f"--ecc {ecc!r}: expected sp-p256 or generic")
    rel = releases.get(release)
    req = lab.Request(
        flavours=flavours, target=target, tests=tests, quick=quick,
        release=rel.name, wolfssl_config=wolfssl_config, ecc=ecc, toolchain=toolchain,
        clock=clock, store=store_dir, login=login, image=image,
        initrd=initrd, append=append, rootfs=rootfs, packages=packages, wpad_build=wpad_build,
        arch=arch, cpu_crypto=cpu_crypto,
    )  # fmt: skip
    err = console(stderr=True)
    if rootfs and not report_only:  # one image's record, keyed by its rootfs: shown as run
        ran = lab.run(req, say=lambda line: err.print(line, markup=False, highlight=False))
        shown = tables.Stored(
            handshake={r.common.flavour: r for r in ran if isinstance(r, Handshakes)},
            memory={r.common.flavour: r for r in ran if isinstance(r, HeapUse)},
            wifi={r.common.flavour: r for r in ran if isinstance(r, WifiConnections)},
        )
        for t in tables.tables(shown, target):
            console().print(t)
        return
    if not report_only:
        lab.run(req, say=lambda line: err.print(line, markup=False, highlight=False))
    elif target not in lab.TARGETS:
        raise WolfError(f"unknown target {target!r}", hint=f"one of: {', '.join(lab.TARGETS)}")
    st = store.FileStore(paths.store_dir(store_dir))
    label = place_label(target, lab_variant(arch, cpu_crypto))
    results = tables.stored(st, label, flavours)
    out = console()
    if not results:
        raise WolfError(f"no perf records for {label} in {st.root}",
                        hint="run `invoke perf` without --report-only first")  # fmt: skip
    for t in tables.tables(results, label):
        out.print(t)
    out.print(tables.caption(results), markup=False, highlight=False)


def _arch(arch: str | None, target: str) -> str:
    """--arch: an architecture of data/footprint/arch.toml that qemu-user emulates; a router or
    VM says its own (perf/open_place.lab_arch)."""
    if arch is None:
        return LAB_ARCH
    if target != "qemu":
        raise WolfError("--arch: only with --target qemu (a router or VM runs its own)")
    emulated = [a for a in spec.arch_names() if spec.get_arch(a).qemu_cpu]
    if arch not in emulated:
        raise WolfError(f"--arch {arch!r}: not an architecture the lab emulates",
                        hint=f"one of: {', '.join(emulated)}")  # fmt: skip
    return arch


IMAGE_TESTS = ("handshake", "memory", "wifi")  # what runs inside a real image (--rootfs)


def _image_tests(
    target: str, image: str | None, tests: tuple[str, ...], flavours: tuple[str, ...],
    given: dict[str, str | None],
) -> tuple[str, ...]:  # fmt: skip
    """--rootfs (and --packages, --wpad-build for Wi-Fi): the lab's tests inside a real image
    (perf/image_heap.py, perf/wifi_image.py), one flavour's image per run; the tests to run,
    or one line for each way of asking for them wrongly."""
    named = ", ".join(k for k, v in given.items() if v is not None)
    if not named:
        return tests
    if target != "vm":
        raise WolfError(f"{named}: only with --target vm (the tests inside a real image)")
    if tests == lab.TESTS:  # not named: what the options given can run
        tests = IMAGE_TESTS if given["--packages"] else ("handshake", "memory")
    if not set(tests) <= set(IMAGE_TESTS):
        raise WolfError(f"{named}: a real image runs --test handshake, memory and wifi only",
                        hint="crypto: --image with the initramfs kernel; the soak on a real "
                        "image: bench/openwrt_vm.py (docs/perf.md)")  # fmt: skip
    wifi_only = [k for k in ("--packages", "--wpad-build") if given[k] is not None]
    if wifi_only and "wifi" not in tests:
        raise WolfError(f"{', '.join(wifi_only)}: only with --test wifi")
    missing = [k for k, v in (("--image", image), ("--rootfs", given["--rootfs"])) if v is None]
    if "wifi" in tests and given["--packages"] is None:
        missing.append("--packages")
    if missing:
        raise WolfError(f"the tests in a real image need {', '.join(missing)}",
                        hint="--image a malta kernel without initramfs (for wifi: with "
                        "mac80211_hwsim), --rootfs the flavour's rootfs image, --packages the "
                        "build's bin/packages/<arch>")  # fmt: skip
    if len(flavours) != 1:
        raise WolfError("--rootfs is one flavour's image: pass --flavour with one flavour")
    return tests


def _names(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma list option's names; none given, or 'all': the default (every one)."""
    if not value or value.strip() == "all":
        return default
    return tuple(v.strip() for v in value.split(",") if v.strip())


def conformance_main(
    *,
    flavour: str | None = None,
    case: str | None = None,
    jobs: int = 8,
    markdown: bool = False,
    write_docs: str | None = None,
    work: str | None = None,
) -> bool:
    """`invoke tls-conformance`: build the host userlands, run the certificate verification
    suite, print the case x backend table; True when every case is as expected."""
    import tempfile
    from pathlib import Path

    from ..footprint import userland
    from . import conformance

    flavours = _names(flavour, userland.FLAVOURS)
    for f in flavours:
        userland.flavour(f)  # bad options: one line each, before any build
    cases = _names(case, ())
    conformance.check_cases(cases)
    if write_docs:
        if cases or flavours != userland.FLAVOURS:
            raise WolfError("--write-docs writes the whole table: run without --flavour/--case")
        conformance.check_docs(Path(write_docs))
    if work and not Path(work).is_dir():
        raise WolfError(f"--work {work}: not a directory")
    out = console()
    builds = {}
    for f in dict.fromkeys((*flavours, conformance.SERVER_FLAVOUR)):
        out.print(f"userland {f} (host): building or from the cache ...", markup=False)
        builds[f] = userland.build(f, arch="host")
    clients = {f: builds[f] for f in flavours}

    def progress(r: conformance.Result) -> None:
        state = "as expected" if r.ok else "NOT as expected: " + "; ".join(r.problems)
        out.print(f"{r.backend:15} {r.case:28} {', '.join(r.measured.outcomes)}: {state}",
                  markup=False, highlight=False)  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="wolf-conformance-", dir=work) as tmp:
        results = conformance.run(
            clients,
            builds[conformance.SERVER_FLAVOUR],
            Path(tmp),
            cases=cases,
            jobs=jobs,
            on_result=progress,
        )
    if markdown:
        out.print(conformance.markdown(results), markup=False, highlight=False)
    for b in dict.fromkeys(r.backend for r in results):
        mine = [r for r in results if r.backend == b]
        out.print(f"{b}: {sum(r.ok for r in mine)}/{len(mine)} cases as expected", markup=False)
    if write_docs:
        conformance.write_docs(Path(write_docs), results)
        out.print(f"wrote the table into {write_docs}", markup=False)
    return all(r.ok for r in results)
