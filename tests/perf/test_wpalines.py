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


# the real malta/be image's wpad-basic-wolfssl (2025.08.26~ca266cc2-r1) prints no debug lines
# (WPA_MSG_MIN_PRIORITY 3): what it and its hostapd_cli printed for an SAE H&P connection
IMG_STATUS = ("bssid=02:00:00:00:00:00\nfreq=2412\nssid=wolf-wifi\nid=0\nmode=station\n"
              "pairwise_cipher=CCMP\ngroup_cipher=CCMP\nkey_mgmt=SAE\npmf=2\n"
              "mgmt_group_cipher=BIP\nsae_group=19\nsae_h2e=0\nsae_pk=0\nwpa_state=COMPLETED\n"
              "address=02:00:00:00:01:00\n")  # fmt: skip
IMG_AP = ("1796494697.464200: wlan0: AP-STA-CONNECTED 02:00:00:00:01:00 auth_alg=sae\n"
          "1796494697.484182: wlan0: EAPOL-4WAY-HS-COMPLETED 02:00:00:00:01:00")  # fmt: skip
IMG_PMKSA = ("Index / SPA / PMKID / expiration (in seconds) / opportunistic\n"
             "0 02:00:00:00:01:00 1be70a2ad585544cf8fe9decc4830dfa 43199 0\n")  # fmt: skip
IMG_STA = ("1796494696.921704: wlan1: SME: Trying to authenticate with 02:00:00:00:00:00 "
           "(SSID='wolf-wifi' freq=2412 MHz)\n1796494697.474298: wlan1: CTRL-EVENT-CONNECTED - "
           "Connection to 02:00:00:00:00:00 completed [id=0 id_str=]")  # fmt: skip


def test_negotiated_without_debug_lines_from_the_ap_s_events_and_cache() -> None:
    w = {"wpa_cli status": IMG_STATUS, "hostapd": IMG_AP, "hostapd_cli pmksa": IMG_PMKSA,
         "wpa_supplicant": IMG_STA}  # fmt: skip
    got, wrong = wpalines.negotiated("sae-hnp", w)
    assert wrong == ""
    assert (got["group"], got["h2e"]) == ("19", "0")
    assert got["pmkid"] == "1be70a2ad585544cf8fe9decc4830dfa"
    assert "the mode asks for 1" in wpalines.negotiated("sae-h2e", w)[1]
    # each witness missing or about another station fails it
    other = IMG_PMKSA.replace("02:00:00:00:01:00", "02:00:00:00:02:00")
    assert "0 entries" in wpalines.negotiated("sae-hnp", {**w, "hostapd_cli pmksa": other})[1]
    no_4way = {**w, "hostapd": IMG_AP.splitlines()[0]}
    assert "4-way handshake" in wpalines.negotiated("sae-hnp", no_4way)[1]
    opened = {**w, "hostapd": IMG_AP.replace("auth_alg=sae", "auth_alg=open")}
    assert "not sae" in wpalines.negotiated("sae-hnp", opened)[1]
    # OWE: the same AP witnesses with auth_alg=open; its group is not reported
    owe = {**w, "wpa_cli status": IMG_STATUS.replace("key_mgmt=SAE", "key_mgmt=OWE"),
           "hostapd": IMG_AP.replace("auth_alg=sae", "auth_alg=open")}  # fmt: skip
    got, wrong = wpalines.negotiated("owe", owe)
    assert wrong == "" and "group" not in got
    assert "not OWE" in wpalines.negotiated("owe", {**owe, "wpa_cli status": IMG_STATUS})[1]


@pytest.mark.parametrize(
    ("values", "want"),
    [([5.0], {"min": 5.0, "p25": 5.0, "p75": 5.0, "max": 5.0}),
     ([1.0, 2.0, 3.0, 4.0, 5.0], {"min": 1.0, "p25": 2.0, "p75": 4.0, "max": 5.0}),
     ([], {})],
)  # fmt: skip
def test_spread(values: list[float], want: dict[str, float]) -> None:
    assert wpalines.spread(values) == want
