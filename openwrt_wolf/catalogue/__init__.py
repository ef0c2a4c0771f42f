"""The catalogue: devices, releases and flavours, resolved from what the user typed.
Takes data/*.toml or an OpenWrt tree; gives Device, Release and Flavour records."""
