"""What hostapd and wpa_supplicant say, read: their `-t` event lines (the time of each
connection), `wpa_cli status`, and the debug lines of a witness connection (the group each side
chose, hash-to-element or not, the PMKID each derived). perf/wifi.py runs the daemons."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

# wpa_supplicant -t / hostapd -t: "<seconds>.<microseconds>: <message>"
_STAMP = re.compile(r"^(\d+\.\d{6}): (.*)$")


@dataclass(frozen=True)
class Timed:
    ms: float  # first "SME: Trying to authenticate" -> CTRL-EVENT-CONNECTED
    auth_ms: float  # ... -> "Trying to associate"


def connection_times(sta_log: str) -> list[Timed]:
    """Each connection in wpa_supplicant's -t lines. A connection starts at the first
    authentication attempt after the previous connection or disconnection (retries count in)."""
    out: list[Timed] = []
    start = assoc = None
    for line in sta_log.splitlines():
        m = _STAMP.match(line.strip())
        if not m:
            continue
        t, msg = float(m[1]), m[2]
        if "SME: Trying to authenticate" in msg and start is None:
            start = t
        elif "Trying to associate with" in msg and start is not None:
            assoc = t
        elif "CTRL-EVENT-CONNECTED" in msg and start is not None:
            out.append(Timed(round((t - start) * 1000, 3),
                             round(((assoc or t) - start) * 1000, 3)))  # fmt: skip
            start = assoc = None
        elif "CTRL-EVENT-DISCONNECTED" in msg:
            start = assoc = None
    return out


def status_fields(text: str) -> dict[str, str]:
    """key=value lines (wpa_cli status, hostapd_cli all_sta)."""
    return dict(ln.strip().split("=", 1) for ln in text.splitlines() if "=" in ln)


def _last(pattern: str, text: str) -> str:
    found = re.findall(pattern, text)
    return str(found[-1]) if found else ""


def negotiated(mode: str, witness: dict[str, str]) -> tuple[dict[str, str], str]:
    """What the witness connection negotiated, from the daemons' own lines (OpenWrt's hostapd
    has no per-station MIB on its control interface: 252-disable_ctrl_iface_mib.patch), and
    why it is not what the mode asks for ("" when it is). Both sides must have derived the
    same PMKID: the same group and the same secret."""
    sta = status_fields(witness.get("wpa_cli status", ""))
    ap_lines, sta_lines = witness.get("hostapd", ""), witness.get("wpa_supplicant", "")
    got = {"key_mgmt": sta.get("key_mgmt", "")}
    if sta.get("wpa_state") != "COMPLETED":
        return got, f"the station's state is {sta.get('wpa_state', 'unknown')}, not COMPLETED"
    if not re.search(r"\b(SAE|OWE): ", ap_lines + sta_lines):
        return _without_debug(mode, witness, sta, got)
    if mode.startswith("sae"):
        kind = "SAE"
        got |= {
            "group": sta.get("sae_group", ""),
            "ap_group": _last(r"SAE: Selecting supported ECC group (\d+)", ap_lines),
            "h2e": sta.get("sae_h2e", ""),
            "ap_h2e": _last(r"SAE: Derive keys - H2E=(\d)", ap_lines),
        }
        want_h2e = "1" if mode == "sae-h2e" else "0"
        if got["group"] != got["ap_group"]:
            return got, f"station group {got['group']!r}, AP group {got['ap_group']!r}"
        if (got["h2e"], got["ap_h2e"]) != (want_h2e, want_h2e):
            return got, (f"H2E station {got['h2e']!r}, AP {got['ap_h2e']!r}; the mode asks for "
                         f"{want_h2e}")  # fmt: skip
    else:
        kind = "OWE"
        got["group"] = _last(r"OWE: Try to use group (\d+)", sta_lines.split("CTRL-EVENT-CONN")[0])
    if got["key_mgmt"] != kind:
        return got, f"key_mgmt={got['key_mgmt']}, not {kind}"
    pmkid = rf"{kind}: PMKID - hexdump\(len=16\): ([0-9a-f ]+)"
    got["pmkid"] = _last(pmkid, sta_lines).strip()
    if not got["group"] or not got["pmkid"] or got["pmkid"] != _last(pmkid, ap_lines).strip():
        return got, f"no group or no PMKID both daemons derived alike ({got})"
    return got, ""


_PMKSA = re.compile(r"^\d+ ([0-9a-f:]{17}) ([0-9a-f]{32}) ", re.M)  # hostapd_cli pmksa


def _without_debug(
    mode: str, witness: dict[str, str], sta: dict[str, str], got: dict[str, str]
) -> tuple[dict[str, str], str]:
    """A wpad without debug lines (the real images'): the station's status (key management,
    SAE group, H2E), and on the AP, for the station's address: AP-STA-CONNECTED with the
    mode's auth_alg, EAPOL-4WAY-HS-COMPLETED (its MICs verify only when both sides hold the
    same PMK: the same SAE group and secret, or OWE's same Diffie-Hellman result) and the PMKSA
    entry SAE or OWE left in hostapd's cache (its PMKID). The AP's sae_pwe allows only the
    mode's method; the OWE group is not reported (the daemons' default: 19)."""
    kind, alg = ("SAE", "sae") if mode.startswith("sae") else ("OWE", "open")
    got["witness"] = "station status; AP events and PMKSA cache (no debug lines)"
    if kind == "SAE":
        got |= {"group": sta.get("sae_group", ""), "h2e": sta.get("sae_h2e", "")}
        want_h2e = "1" if mode == "sae-h2e" else "0"
        if got["h2e"] != want_h2e:
            return got, f"H2E station {got['h2e']!r}; the mode asks for {want_h2e}"
        if not got["group"]:
            return got, "the station reports no SAE group"
    if got["key_mgmt"] != kind:
        return got, f"key_mgmt={got['key_mgmt']}, not {kind}"
    addr = sta.get("address", "")
    ap = witness.get("hostapd", "")
    algs = re.findall(rf"AP-STA-CONNECTED {re.escape(addr)} auth_alg=(\w+)", ap) if addr else []
    if not algs or algs[-1] != alg:
        return got, f"hostapd's AP-STA-CONNECTED for {addr or '?'}: auth_alg={algs[-1:]}, not {alg}"
    if f"EAPOL-4WAY-HS-COMPLETED {addr}" not in ap:
        return got, f"hostapd did not complete the 4-way handshake with {addr}"
    pmkids = [k for a, k in _PMKSA.findall(witness.get("hostapd_cli pmksa", "")) if a == addr]
    if len(pmkids) != 1:
        return got, f"hostapd's PMKSA cache has {len(pmkids)} entries for {addr}, not 1"
    got["pmkid"] = pmkids[0]
    return got, ""


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {"min": min(values), "p25": round(q[0], 3), "p75": round(q[2], 3), "max": max(values)}
