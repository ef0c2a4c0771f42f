"""Builds: one job per (device, flavour) through OpenWrt's ImageBuilder, SDK or buildroot.
Takes a request (flavours, devices, release, backend); gives images in bin/ and build records."""
