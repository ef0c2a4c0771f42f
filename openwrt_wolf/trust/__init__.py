"""Nothing that comes from a file or the network is trusted (docs/threat-model.md): the one
reader of such files (untrusted.py), output made safe per format (escape.py), secrets never
printed (secrets.py)."""
