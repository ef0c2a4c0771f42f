"""The source side of a buildroot: its dl/ filled from what this machine reaches
(docs/sources.md)."""
