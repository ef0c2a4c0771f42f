"""Task glue for `invoke hosttools`: list a job's host tools and install the missing ones."""

from __future__ import annotations

from . import hosttools


def main(group: str = "test", install: bool = False) -> None:
    for t in hosttools.tools_for(hosttools.group(group)):
        print(f"{'ok     ' if t.present() else 'MISSING'} {t.name:24} {t.package:24} {t.why}")
    if install:
        hosttools.ensure(group)


def host_tools() -> None:
    """`invoke host-tools`: build OpenWrt's host image tools once (cached) and list them."""
    from ..term import console
    from . import openwrt_tools

    con = console(stderr=True)
    tools = openwrt_tools.ensure(progress=lambda step: con.print(f"building {step} ..."))
    for source in tools.sources:
        print(f"source  {source}")
    print(f"bin     {tools.bin_dir}  ({len(tools.names())} tools, as $(STAGING_DIR_HOST)/bin)")
    for name in openwrt_tools.IMAGE_TOOLS:
        print(f"{name:22} {tools.tool(name)}")
