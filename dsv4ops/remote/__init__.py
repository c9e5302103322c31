"""Execution seam (local subprocess or SSH) and the process supervisor built on it."""
