"""data/sources.toml, read once."""

from __future__ import annotations

import tomllib
from functools import cache
from typing import Any

from ...paths import DATA_DIR


@cache
def data() -> dict[str, Any]:
    return tomllib.loads((DATA_DIR / "sources.toml").read_text())
