# Stand-in for OpenWrt's include/target.mk (openwrt-wolf tests). The stand-in's defconfig
# takes the default package lists from .standin.json; this file is here because the
# USE_WOLFSSL test series edits it, as the real patch set edits the real one.

DEFAULT_PACKAGES.router:=\
	dnsmasq \
	firewall4 \
	ppp \
	ppp-mod-pppoe

ifneq ($(DUMP),)
  all: dumpinfo
endif
