"""`invoke footprint --component`: bad names are one error line before anything is built."""

from __future__ import annotations

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.footprint import cli, components


def test_unknown_component_is_one_line_with_a_suggestion() -> None:
    with pytest.raises(WolfError) as e:
        cli.main(library="mbedtls", component="apkk")
    assert e.value.message == "unknown component 'apkk'"
    assert e.value.hint == "did you mean apk?"


def test_all_names_every_component() -> None:
    assert "apk" in components.names()
    components.check(components.names())  # no error
