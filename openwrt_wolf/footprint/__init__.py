"""Footprint lab: the TLS libraries cross-built the way OpenWrt's package Makefiles build them.
Takes library versions and options (data/footprint/); gives stripped, xz and squashfs costs."""
