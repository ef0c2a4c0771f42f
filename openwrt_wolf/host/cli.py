"""Task glue for `invoke hosttools`: list a job's host tools and install the missing ones."""

from __future__ import annotations

from . import hosttools


def main(group: str = "test", install: bool = False) -> None:
    for t in hosttools.tools_for(hosttools.group(group)):
        print(f"{'ok     ' if t.present() else 'MISSING'} {t.name:24} {t.package:24} {t.why}")
    if install:
        hosttools.ensure(group)
