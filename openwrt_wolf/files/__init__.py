"""Files from outside and files we make: an archive unpacked (archive), the one
fetch-verify-cache every downloader uses (fetch), a file's sha256 (hashing), a lock (locks),
and the one writer (outputs). The floor every stage stands on, above trust/."""
