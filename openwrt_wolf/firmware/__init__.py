"""Firmware images: split them, read squashfs, measure TLS libraries, and the fit model.
Takes image files or bin/ directories; gives Artifacts, RootfsInfo and Fit verdicts."""
