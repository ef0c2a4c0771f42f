"""Footprint tables (terminal and Markdown), laid out like the published comparison's row, with
the published xz figure beside ours where there is one (data/footprint/published.toml)."""

from __future__ import annotations

from rich.table import Table

from .. import paths
from ..errors import WolfError
from ..results import store
from ..results.footprint import KIND, Footprint
from .spec import _toml

HEADERS = ("library", "version", "config", "ECC", "files", "stripped", "xz -9e", "squashfs",
           ".text", ".data", ".bss", "published xz", "Δ", "smoke")  # fmt: skip


def published(fp: Footprint) -> int | None:
    p = _toml("published.toml")["published"].get(fp.library)
    return int(p["xz"]) if p and p["config"] == fp.config else None


def _row(fp: Footprint) -> list[str]:
    pub = published(fp)
    delta = f"{(fp.xz - pub) / pub:+.1%}" if pub else "–"
    smoke = "–" if fp.smoke is None else ("ok" if fp.smoke.ok else "FAILED")
    return [
        fp.title,
        fp.version,
        fp.config,
        fp.ecc or "–",
        ", ".join(f.name for f in fp.files),
        f"{fp.installed:,}",
        f"{fp.xz:,}",
        f"{fp.squashfs_cost:,}",
        f"{fp.text:,}",
        f"{fp.data:,}",
        f"{fp.bss:,}",
        f"{pub:,}" if pub else "–",
        delta,
        smoke,
    ]


def table(fps: list[Footprint], title: str) -> Table:
    t = Table(title=title)
    for h in HEADERS:
        t.add_column(
            h, justify="right" if h not in ("library", "config", "ECC", "files") else "left"
        )
    for fp in fps:
        t.add_row(*_row(fp))
    return t


def markdown(fps: list[Footprint]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_row(fp)) + " |" for fp in fps]
    return "\n".join(lines)


def caption(fps: list[Footprint]) -> str:
    if not fps:
        return ""
    fp = fps[0]
    return (
        f"stripped = strip --strip-all + sstrip -z (as OpenWrt installs it); xz = "
        f"{fp.xz_settings}; squashfs = growth of an xz squashfs (-b {fp.squashfs_block // 1024}k) "
        f"when the files are added; toolchain {fp.toolchain}, {fp.float_abi}"
    )


def stored(store_dir: str | None = None, release: str | None = None) -> list[Footprint]:
    """Footprints in the results store (newest per cache key), for `size-report` and others."""
    st = store.FileStore(paths.store_dir(store_dir))
    out = []
    for r in st.query(KIND, release=release):
        try:
            out.append(Footprint.from_dict(r.data, f"footprint record {r.path}"))
        except WolfError as e:
            store.skipped(e)
    return out


STACK_HEADERS = ("flavour", "config", "ECC", "package", "files", "stripped", "xz -9e")


def stack_rows(fps: list[Footprint]) -> list[list[str]]:
    """Per library build: the library, each component built against it, and the stack's total
    (stripped = as installed, after sstrip), so flavour differences read off one table."""
    rows = []
    for fp in fps:
        names = ", ".join(f.name for f in fp.files)
        rows.append([fp.title, fp.config, fp.ecc or "–", "library", names,
                     f"{fp.installed:,}", f"{fp.xz:,}"])  # fmt: skip
        for c in fp.components:
            where = c.installed_path or ", ".join(f.name for f in c.files)
            rows.append(["", "", "", c.package, where, f"{c.installed:,}", f"{c.xz:,}"])
        total_i = fp.installed + sum(c.installed for c in fp.components)
        total_x = fp.xz + sum(c.xz for c in fp.components)
        rows.append(["", "", "", "total", "", f"{total_i:,}", f"{total_x:,}"])
    return rows


def stack_table(fps: list[Footprint], title: str) -> Table:
    t = Table(title=title)
    for h in STACK_HEADERS:
        t.add_column(h, justify="right" if h in ("stripped", "xz -9e") else "left")
    for row in stack_rows(fps):
        t.add_row(*row)
    return t


def stack_markdown(fps: list[Footprint]) -> str:
    lines = ["| " + " | ".join(STACK_HEADERS) + " |", "|" + "---|" * len(STACK_HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in stack_rows(fps)]
    return "\n".join(lines)
