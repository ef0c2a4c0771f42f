"""The USE_WOLFSSL patch set: apply/revert/status on an OpenWrt tree, the defaults check,
what wolfSSL's consumers import. Takes patches/ and a tree; gives a patched tree and checks."""
