"""Task glue for `invoke hosttools` (list a job's host tools, install the missing ones) and
`invoke openwrt-tools` (build OpenWrt's own host image tools)."""

from __future__ import annotations

from ..cli import comma_list as split
from . import hosttools


def main(group: str = "test", install: bool = False) -> None:
    for t in hosttools.tools_for(hosttools.group(group)):
        print(f"{'ok     ' if t.present() else 'MISSING'} {t.name:24} {t.package:24} {t.why}")
    if install:
        hosttools.ensure(group)


def openwrt_tools(dirs: str | None = None, urls: str | None = None) -> None:
    """`invoke openwrt-tools`: build OpenWrt's host image tools once (cached) and list them."""
    from ..term import console
    from . import openwrt_tools as ot
    from . import upstream

    upstream.use_mirrors(split(dirs), split(urls))

    con = console(stderr=True)
    tools = ot.ensure(progress=lambda step: con.print(f"building {step} ..."))
    for source in tools.sources:
        print(f"source  {source}")
    print(f"bin     {tools.bin_dir}  ({len(tools.names())} tools, as $(STAGING_DIR_HOST)/bin)")
    for name in ot.IMAGE_TOOLS:
        print(f"{name:22} {tools.tool(name)}")


def sources(
    fetch: str | None = None,
    digest: str | None = None,
    dirs: str | None = None,
    urls: str | None = None,
) -> None:
    """`invoke sources`: the pin table; --fetch fetches and verifies; --digest FILE prints an
    archive's sha256 and tree-sha256 and the pin they match."""
    from pathlib import Path

    from ..files.hashing import file_sha256
    from . import treedigest, upstream

    upstream.use_mirrors(split(dirs), split(urls))
    if digest:
        path = Path(digest)
        tree = treedigest.tree_sha256(path)
        sha = file_sha256(path)
        match = [p.name for p in upstream.pins().values() if tree == p.tree or sha == p.sha256]
        print(f"tree-sha256 {tree}  {path}")
        print(f"sha256      {sha}  {path}")
        print(f"pin         {', '.join(match) or 'none (data/upstream.toml)'}")
        return
    if fetch:
        names = list(upstream.pins()) if fetch == "all" else split(fetch)
        for name in names:
            upstream.pin(name)  # an unknown name fails before anything is fetched
        for name in names:
            print(f"{name:16} {upstream.tarball(name)}")
        return
    for p in upstream.pins().values():
        print(f"{p.name:16} {p.project:24} {p.version:14} {p.commit[:12]}  {p.urls[0]}")
        print(f"{'':16} file {p.file}  sha256 {p.sha256}  tree-sha256 {p.tree}")
    where = ", ".join(str(d) for d in upstream.mirror_dirs())
    print(f"mirror directories: {where}; mirror URLs: {', '.join(upstream.mirror_urls()) or '-'}")
