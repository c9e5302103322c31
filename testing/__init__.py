"""Shared test helpers (not shipped in the wheel)."""
