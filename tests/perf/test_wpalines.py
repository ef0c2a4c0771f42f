"""Reading hostapd's and wpa_supplicant's lines (perf/wpalines.py) on lines written here in
their formats (wpa_supplicant/events.c, sme.c, src/common/sae.c at ca266cc2), with the
expected values worked out by hand."""

from __future__ import annotations

import pytest

from openwrt_wolf.perf import wpalines

STA_LOG = """\
1000.000000: Successfully initialized wpa_supplicant
1000.100000: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1000.150000: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1000.170000: wlan1: Trying to associate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1000.180500: wlan1: CTRL-EVENT-CONNECTED - Connection to 02:00:00:00:00:00 completed [id=0 id_str=]
1001.000000: wlan1: CTRL-EVENT-DISCONNECTED bssid=02:00:00:00:00:00 reason=3 locally_generated=1
1001.200000: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1001.300000: wlan1: CTRL-EVENT-AUTH-REJECT 02:00:00:00:00:00 auth_type=3 status_code=1
1001.900000: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1001.950000: wlan1: Trying to associate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
1002.000000: wlan1: CTRL-EVENT-CONNECTED - Connection to 02:00:00:00:00:00 completed [id=0 id_str=]
1003.000000: wlan1: CTRL-EVENT-DISCONNECTED bssid=02:00:00:00:00:00 reason=3 locally_generated=1
1003.100000: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 (SSID='w' freq=2412 MHz)
"""


def test_connection_times_from_the_first_attempt() -> None:
    got = wpalines.connection_times(STA_LOG)
    # 1000.1 -> 1000.1805; a rejected attempt and its retry count in: 1001.2 -> 1002.0; the
    # last attempt never connected (no figure)
    assert [(t.ms, t.auth_ms) for t in got] == [(80.5, 70.0), (800.0, 750.0)]


SAE_STATUS = "bssid=02:00:00:00:00:00\nkey_mgmt=SAE\nsae_group=19\nsae_h2e=1\nwpa_state=COMPLETED\n"
PMKID = "SAE: PMKID - hexdump(len=16): b3 08 ca 92 b2 88 35 e5 89 1f 98 d4 87 a1 ce df"
AP = (f"1.0: SAE: Selecting supported ECC group 19\n1.1: SAE: Derive keys - H2E=1 AKMP=0x0\n"
      f"1.2: {PMKID}")  # fmt: skip
STA = f"1.0: SAE: Selecting supported ECC group 19\n1.1: {PMKID}"


def test_negotiated_sae_agrees_on_both_sides() -> None:
    w = {"wpa_cli status": SAE_STATUS, "hostapd": AP, "wpa_supplicant": STA}
    got, wrong = wpalines.negotiated("sae-h2e", w)
    assert wrong == "" and (got["group"], got["ap_group"], got["h2e"]) == ("19", "19", "1")
    _, wrong = wpalines.negotiated("sae-hnp", w)  # the mode asked for hunting-and-pecking
    assert "the mode asks for 0" in wrong
    other = {**w, "hostapd": AP.replace("group 19", "group 20")}
    assert "AP group '20'" in wpalines.negotiated("sae-h2e", other)[1]
    forged = {**w, "hostapd": AP.replace("b3 08", "00 00")}
    assert "PMKID" in wpalines.negotiated("sae-h2e", forged)[1]
    down = {**w, "wpa_cli status": SAE_STATUS.replace("COMPLETED", "SCANNING")}
    assert "SCANNING, not COMPLETED" in wpalines.negotiated("sae-h2e", down)[1]


def test_negotiated_owe_group_before_the_connection() -> None:
    owe = PMKID.replace("SAE", "OWE")
    sta = (f"1.0: OWE: Try to use group 19\n1.1: {owe}\n"
           "1.2: wlan1: CTRL-EVENT-CONNECTED - Connection to x completed\n"
           "1.3: OWE: Try to use group 20\n")  # fmt: skip
    w = {"wpa_cli status": "key_mgmt=OWE\nwpa_state=COMPLETED\n", "hostapd": owe,
         "wpa_supplicant": sta}  # fmt: skip
    got, wrong = wpalines.negotiated("owe", w)
    assert wrong == "" and got["group"] == "19"
    assert "not OWE" in wpalines.negotiated("owe", {**w, "wpa_cli status": SAE_STATUS})[1]


@pytest.mark.parametrize(
    ("values", "want"),
    [([5.0], {"min": 5.0, "p25": 5.0, "p75": 5.0, "max": 5.0}),
     ([1.0, 2.0, 3.0, 4.0, 5.0], {"min": 1.0, "p25": 2.0, "p75": 4.0, "max": 5.0}),
     ([], {})],
)  # fmt: skip
def test_spread(values: list[float], want: dict[str, float]) -> None:
    assert wpalines.spread(values) == want
