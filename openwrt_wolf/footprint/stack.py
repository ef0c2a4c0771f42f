"""The whole TLS stack per flavour, as flash sees it: the TLS library plus every package that
changes with the flavour (libustream-ssl, px5g, uencrypt, apk), stripped as OpenWrt installs
them, xz, and the growth of an xz squashfs when they are all added: the flavour difference in
flash, read off one table (`invoke footprint --stack`)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from .. import paths
from ..results import key_policy, store
from ..results.footprint import STACK_KIND as KIND
from ..results.footprint import Stack, StackPart
from . import apk, lab, sizes, spec, userland

PACKAGES = {  # OpenWrt package per component and flavour (package/*/Makefile)
    "mbedtls": {
        "libustream-ssl": "libustream-mbedtls",
        "px5g": "px5g-mbedtls",
        "uencrypt": "uencrypt-mbedtls",
    },
    "wolfssl": {
        "libustream-ssl": "libustream-wolfssl",
        "px5g": "px5g-wolfssl",
        "uencrypt": "uencrypt-wolfssl",
    },
    "openssl": {
        "libustream-ssl": "libustream-openssl",
        "px5g": "(openssl-util)",
        "uencrypt": "uencrypt-openssl",
    },
}


def collect(
    flavour: str,
    arch: str = "mips_24kc",
    *,
    toolchain: str | None = None,
    store_dir: str | None = None,
) -> Stack:
    """Build (cached) and measure one flavour's stack; the record goes to the results store."""
    ub = userland.build(flavour, arch=arch, toolchain_path=toolchain)
    fp = ub.library
    by_name = {f.name: f for f in ub.files}
    pk = PACKAGES[flavour]
    parts = [StackPart("TLS library", f"lib{fp.library} ({fp.config})", list(fp.files))]
    parts.append(
        StackPart(
            "libustream-ssl",
            pk["libustream-ssl"],
            [by_name["libustream-ssl.so"]],
            f"backend {ub.backend}",
        )
    )
    notes = [n for n in ub.notes if "uhttpd" not in n]  # uhttpd is not part of the stack
    if ub.px5g is not None:
        parts.append(StackPart("px5g", pk["px5g"], [by_name["px5g"]]))
    else:
        notes.append(
            "OpenSSL: OpenWrt has no px5g-openssl; uhttpd's init script makes its "
            "certificate with /usr/bin/openssl (openssl-util), not measured here"
        )
    if ub.uencrypt is not None:
        parts.append(StackPart("uencrypt", pk["uencrypt"], [by_name["uencrypt"]]))
    installed = [lab.build_root() / fp.cache_key / "installed" / f.name for f in fp.files]
    installed += [ub.root / "measure" / "installed" / f.name for p in parts[1:] for f in p.files]
    # apk: the package manager's crypto backend follows the flavour (apk-wolfssl with USE_WOLFSSL)
    comp = apk.for_footprint(fp, toolchain)  # apk links the same library build (apk.FLAVOUR_CONFIG)
    parts.append(StackPart("apk", comp.package, list(comp.files)))
    installed += [
        apk.root() / comp.cache_key / "measure" / "installed" / f.name for f in comp.files
    ]
    block = spec.get_arch(ub.arch).squashfs_block  # ub.arch: the lab name ("host" -> x86_64)
    st = Stack(
        flavour=flavour,
        arch=ub.arch,
        library=f"{fp.title} {fp.version} {fp.config}",
        parts=parts,
        squashfs_cost=sizes.squashfs_cost(installed, block),
        squashfs_block=block,
        notes=notes,
    )
    store.FileStore(paths.store_dir(store_dir)).put(
        store.Record(
            kind=KIND,
            key=key_policy.named(ub.arch, flavour, ub.root.name),
            release=fp.release,
            device=None,
            flavour=flavour,
            data=st.to_dict(),
        )
    )
    return st


def rows(stacks: list[Stack]) -> tuple[list[str], list[list[str]]]:
    """Rows: components; columns: per flavour stripped / xz; totals, Δ to the first flavour,
    and the squashfs growth of the whole stack."""
    comps: list[str] = []
    for s in stacks:
        comps += [p.component for p in s.parts if p.component not in comps]
    head = ["component"] + [f"{s.flavour} {k}" for s in stacks for k in ("stripped", "xz")]
    out = []
    for c in comps:
        row = [c]
        for s in stacks:
            p = s.part(c)
            row += [f"{p.installed:,}", f"{p.xz:,}"] if p else ["–", "–"]
        out.append(row)
    out.append(["total", *[v for s in stacks for v in (f"{s.installed:,}", f"{s.xz:,}")]])
    base = stacks[0]
    out.append(
        [
            f"Δ vs {base.flavour}",
            *[
                v
                for s in stacks
                for v in (f"{s.installed - base.installed:+,}", f"{s.xz - base.xz:+,}")
            ],
        ]
    )
    out.append(
        [
            f"squashfs -b {base.squashfs_block // 1024}k growth",
            *[v for s in stacks for v in ("", f"{s.squashfs_cost:,}")],
        ]
    )
    out.append(
        [
            f"Δ squashfs vs {base.flavour}",
            *[v for s in stacks for v in ("", f"{s.squashfs_cost - base.squashfs_cost:+,}")],
        ]
    )
    return head, out


def markdown(stacks: list[Stack]) -> str:
    head, body = rows(stacks)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def table(stacks: list[Stack], title: str) -> Table:
    head, body = rows(stacks)
    t = Table(title=title)
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i == 0 else "right")
    for r in body:
        t.add_row(*r)
    return t


def reference_notes(stacks: list[Stack]) -> list[str]:
    """Our stack differences beside the reference's rootfs growth, and every build note."""
    ref = userland.reference()
    base = stacks[0]
    out = []
    for s in stacks[1:]:
        for r in ref.get(s.flavour, []):
            approx = "about " if r.get("approx") else ""
            out.append(
                f"{s.flavour} vs {base.flavour}: stack xz {s.xz - base.xz:+,} B, squashfs "
                f"{s.squashfs_cost - base.squashfs_cost:+,} B; reference rootfs {approx}"
                f"{r['rootfs_delta']:+,} B ({r['device']})"
            )
    for s in stacks:
        out += [f"{s.flavour}: {n}" for n in s.notes]
    return out


def save(stacks: list[Stack], path: Path) -> None:
    store.write_atomic(path, json.dumps([s.to_dict() for s in stacks], indent=2) + "\n")
