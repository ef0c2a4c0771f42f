"""Measurements on a Target: free memory at idle after boot.
Takes a Target (VM or router) and a boot count; gives memory records in the results store."""
