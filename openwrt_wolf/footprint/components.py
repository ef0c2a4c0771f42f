"""Packages the lab builds against each library build and adds to its footprint (the rest of a
flavour's TLS stack): component name -> builder. `invoke footprint --component NAME,...`."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ..errors import WolfError
from ..results.footprint import Component
from . import apk, recipes, spec
from .toolchain import Toolchain

Builder = Callable[[spec.BuildSpec, str, recipes.BuildDirs, Toolchain], Component]

COMPONENTS: dict[str, Builder] = {
    "apk": apk.component,
}


def names() -> tuple[str, ...]:
    return tuple(COMPONENTS)


def check(requested: tuple[str, ...]) -> None:
    for name in requested:
        if name not in COMPONENTS:
            close = difflib.get_close_matches(name, list(COMPONENTS), n=2)
            hint = (
                f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(COMPONENTS)}"
            )
            raise WolfError(f"unknown component {name!r}", hint=hint)


def build_component(
    name: str, bs: spec.BuildSpec, key: str, dirs: recipes.BuildDirs, tc: Toolchain
) -> Component:
    return COMPONENTS[name](bs, key, dirs, tc)
