"""openwrt-wolf: build and measure OpenWrt firmware in three TLS flavours."""

__version__ = "0.1.0"
