"""Footprint lab: cross-build the TLS libraries (Mbed TLS, wolfSSL, OpenSSL) the way OpenWrt's
package Makefiles build them, and measure what each costs on flash (stripped, xz, inside an xz
squashfs) without building OpenWrt. Data: data/footprint/*.toml; docs: docs/footprint.md."""
