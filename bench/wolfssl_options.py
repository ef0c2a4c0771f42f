"""Benchmark: what two configure options of the minimal wolfSSL cost in a TLS 1.3 handshake.

    .venv/bin/python bench/wolfssl_options.py [--rounds 3] [--handshakes 20]

The qemu-user lab's P-256 handshake, server CPU, wolfSSL/Mbed TLS, went from 0.50 (2026-12-01)
to 0.83 (2026-12-02) after the minimal mode gained --enable-altcertchains (issue 19) and
--enable-compkey (issue 25, OWE). This builds the minimal library four ways (as shipped, without
each option, without both = the 2026-12-01 options) with the footprint lab, the wolfSSL
userland (uhttpd, ustream-ssl) against each, and Mbed TLS's userland, then runs the lab's
handshake test (perf/handshake.py: the host's client offers one group, the server signs with its
P-256 certificate) for all five in each round, side by side, so load from elsewhere hits them
alike. Printed per group: the median over rounds of the server's CPU per handshake (the uhttpd
process's utime+stime under qemu-user) and its ratio to Mbed TLS; per variant, what the build's
own wolfssl/options.h defines (the oracle for "still SP P-256": WOLFSSL_HAVE_SP_ECC,
WOLFSSL_SP_256 or no WOLFSSL_SP_NO_256).
Emulated figures (qemu-user on this host), labelled so: ratios, not router milliseconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

from openwrt_wolf.footprint import lab as fp_lab
from openwrt_wolf.footprint import spec, toolchain, userland
from openwrt_wolf.host import hosttools
from openwrt_wolf.perf import crypto, handshake, net, netlab, open_place, programs

ARCH = "mips_24kc"
VERSION = "5.9.2"  # the lab's wolfSSL (25.12.5's 5.9.1 is not in Debian)
VARIANTS: dict[str, tuple[str, ...]] = {  # name -> the configure options dropped
    "shipped": (),
    "-compkey": ("--enable-compkey",),
    "-altcertchains": ("--enable-altcertchains",),
    "-both (12-01)": ("--enable-compkey", "--enable-altcertchains"),
}
DEFINES = ("WOLFSSL_HAVE_SP_ECC", "WOLFSSL_SP_NO_256", "WOLFSSL_SP_MATH", "WOLFSSL_SP_MATH_ALL",
           "HAVE_COMP_KEY", "WOLFSSL_ALT_CERT_CHAINS", "WOLFSSL_SP_SMALL")  # fmt: skip


def defines(fp_key: str) -> list[str]:
    """What the build's own options.h defines, of DEFINES."""
    text = (fp_lab.build_root() / fp_key / "include" / "wolfssl" / "options.h").read_text()
    return [d for d in DEFINES if f"#define {d}\n" in text or f"#define {d} " in text]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--handshakes", type=int, default=20, help="per group, per round")
    args = ap.parse_args()
    a = spec.get_arch(ARCH)
    qemu = a.qemu or "qemu-mips-static"
    hosttools.ensure([*toolchain.host_tools(a), qemu, "patch", "openssl", "gcc"])
    tc = toolchain.find(a, None)
    shipped = spec.resolve("wolfssl", None, "minimal", ARCH, ecc="sp-p256",
                           soft_float=tc.soft_float, version=VERSION)  # fmt: skip
    builds: dict[str, userland.UserlandBuild] = {}
    for name, drop in VARIANTS.items():
        missing = [o for o in drop if o not in shipped.options]
        if missing:
            raise SystemExit(f"wolfssl_options: the minimal mode has no {', '.join(missing)}")
        options = tuple(o for o in shipped.options if o not in drop)
        bs = dataclasses.replace(shipped, options=options)
        print(f"build: wolfssl {name}", flush=True)
        builds[f"wolfssl {name}"] = userland.build("wolfssl", ARCH, library=bs)
    print("build: mbedtls", flush=True)
    builds["mbedtls"] = userland.build("mbedtls", ARCH)
    conf = crypto.settings()
    place = open_place.qemu_place(a, tc, a.qemu_cpu)
    sizes = netlab.sizes(conf["net"], quick=False) | {"handshakes": args.handshakes}
    cpu: dict[str, dict[str, list[float]]] = {n: {} for n in builds}
    with tempfile.TemporaryDirectory(prefix="wolfssl-options-") as tmp:
        work = Path(tmp)
        pki = net.make_pki(work / "pki", int(conf["net"]["page_bytes"]),
                           int(conf["net"]["download_bytes"]))  # fmt: skip
        probe = net.probe()
        shim = programs.shim("heaptrack", shipped, tc)
        for r in range(args.rounds):
            for name, ub in builds.items():
                flavour = name.split()[0]
                at = dataclasses.replace(place, workdir=work / f"r{r}-{len(cpu[name])}-{flavour}")
                lab = netlab.NetLab(
                    flavour=flavour, ub=ub, heaptrack=shim, place=at,
                    probe=probe, pki=pki, conf=sizes, quick=False, clock="wall",
                    say=lambda s: None,
                )  # fmt: skip
                res = handshake.measure(lab)
                for g, ms in res.server_cpu_ms.items():
                    cpu[name].setdefault(g, []).append(ms)
                print(f"round {r + 1}/{args.rounds} {name}: "
                      + ", ".join(f"{g} {ms:.1f} ms" for g, ms in res.server_cpu_ms.items())
                      + (f"; missing {sorted(res.missing)}" if res.missing else ""),
                      flush=True)  # fmt: skip
    groups = [g for g in sizes["groups"] if all(g in c for c in cpu.values())]
    base = {g: statistics.median(cpu["mbedtls"][g]) for g in groups}
    print(f"\nserver CPU per TLS 1.3 handshake, median of {args.rounds} rounds x "
          f"{args.handshakes} (emulated: qemu-user -cpu {a.qemu_cpu}), "
          "ratio to Mbed TLS")  # fmt: skip
    print(f"{'build':<28}" + "".join(f"{g:>22}" for g in groups) + "   options.h")
    for name, ub in builds.items():
        med = {g: statistics.median(cpu[name][g]) for g in groups}
        cells = "".join(f"{med[g]:>14.1f} ({med[g] / base[g]:.2f})" for g in groups)
        shown = "" if name == "mbedtls" else " ".join(defines(ub.library.cache_key))
        print(f"{name:<28}{cells}   {shown}")


if __name__ == "__main__":
    main()
