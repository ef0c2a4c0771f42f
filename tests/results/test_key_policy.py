"""The one key policy (results/key_policy.py): the records committed from real runs were named by
the code of their day; each one's file name must still be the key its model computes from the
record's own data now. A change to how a key is made (the JSON form of a request, the hash's
length, the order of the parts) moves every key of every store: a rebuild of every cached
build and duplicated rows in every report. The oracle is the file names written then."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.results import key_policy
from openwrt_wolf.results.build import BuildRequest
from openwrt_wolf.results.memory import MemoryResult, record_key

RECORDS = Path(__file__).resolve().parent.parent.parent / "docs" / "records"


def committed(kind: str) -> list[Path]:
    found = sorted(p for p in RECORDS.rglob(f"{kind}/*.json") if ".history" not in p.parts)
    assert found, f"no committed {kind} records under {RECORDS}"
    return found


@pytest.mark.parametrize("path", committed("build"), ids=lambda p: p.stem)
def test_a_committed_build_record_is_named_by_its_request(path: Path) -> None:
    rec = json.loads(path.read_text())
    request = BuildRequest.from_dict(rec["data"]["request"])
    assert request.key() == rec["key"] == path.stem


@pytest.mark.parametrize("path", committed("memory"), ids=lambda p: p.stem)
def test_a_committed_memory_record_is_named_by_its_image_and_settings(path: Path) -> None:
    rec = json.loads(path.read_text())
    result = MemoryResult.from_dict(rec["data"], str(path), "data")
    assert record_key(result, rec["device"], rec["flavour"]) == rec["key"] == path.stem


def test_the_readable_parts_there_are_joined() -> None:
    assert key_policy.named("memory", None, "wolfssl", "") == "memory-wolfssl"


@pytest.mark.parametrize(
    "part", ["a/b", "../x", "with space", "x" * 129, "naïve", ""], ids=repr
)
def test_a_key_the_store_could_not_hold_fails_where_it_is_made(part: str) -> None:
    """The store keeps <kind>/<key>.json; a key that is no plain file name is refused in one
    line when it is made, not when a later task reads the store."""
    with pytest.raises(WolfError, match="not a record key"):
        key_policy.named(part)
