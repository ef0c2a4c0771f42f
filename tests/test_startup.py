"""What a cached `invoke build` loads (issue 36: its re-run of a build matrix is a store
hit that should start in well under a second): the modules its task imports, in a fresh
interpreter, pull in no downloader, template engine or ELF reader; those load where a build
downloads, renders or measures. The oracle is the child interpreter's own sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what tasks.build imports, and what its cached path runs (the store, the size report)
CACHED_BUILD = ("tasks", "openwrt_wolf.build.cli", "openwrt_wolf.report.cli",
                "openwrt_wolf.report.render.terminal")  # fmt: skip
HEAVY = ("requests", "urllib3", "jinja2", "elftools", "zstandard", "paramiko",
         "openwrt_wolf.perf.crypto")  # fmt: skip


def test_a_cached_build_loads_no_heavy_module() -> None:
    code = (f"import importlib, json, sys\nfor m in {CACHED_BUILD!r}: importlib.import_module(m)\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, check=True)  # fmt: skip
    assert json.loads(p.stdout) == []
