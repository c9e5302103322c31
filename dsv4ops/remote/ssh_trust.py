"""Which host keys the SSH executor trusts: the operator's known_hosts, read line by line,
with `@revoked` keys refused for every host, and an unknown key refused or (first-use trust)
accepted once and appended as one line.

Kept apart from the executor (`remote.ssh`), which only asks this module what a key means.
"""

from __future__ import annotations

import os
from pathlib import Path

import paramiko

from dsv4ops.localfiles import read_regular


class RevokedHostKey(paramiko.SSHException):  # type: ignore[misc]  # paramiko is untyped
    """The server presented a key that known_hosts marks @revoked (raised before auth)."""

    def __init__(self, key: paramiko.PKey) -> None:
        super().__init__(f"host key {key.get_name()} {key.fingerprint} is revoked")
        self.key = key


def key_id(key: paramiko.PKey) -> tuple[str, str]:
    return key.get_name(), key.get_base64()


# ~100 bytes a line: a million hosts' keys. Anything larger is not a known_hosts file.
MAX_KNOWN_HOSTS_BYTES = 128 * 1024 * 1024


def load_known_hosts(keys: paramiko.HostKeys, path: Path) -> set[tuple[str, str]]:
    """Load plain host-key lines into `keys`; return the keys marked `@revoked`. Raises
    localfiles.FileRefused for anything but /dev/null (no keys) or a regular file of at most
    MAX_KNOWN_HOSTS_BYTES.

    paramiko's own loader raises on a marker line or a damaged line, which would make a normal
    operator known_hosts unusable, so lines are parsed one by one. A revoked key is never
    loaded as trusted, even when a plain line lists it too, so paramiko hands it to the
    missing-key policy, which refuses it (see `HostKeyPolicy`). The host patterns of a
    `@revoked` line are not consulted: the key is refused for every host, stricter than
    OpenSSH only for a key revoked for one host and trusted for another. `@cert-authority`
    lines (host certificates are not supported) and damaged lines are skipped, as OpenSSH
    skips damaged lines: skipping them only means fewer trusted keys.
    """
    trusted: list[paramiko.hostkeys.HostKeyEntry] = []
    revoked: set[tuple[str, str]] = set()
    # a FIFO or a device named as known_hosts in targets.yaml would block or never end the read;
    # /dev/null, OpenSSH's idiom for "trust no stored key", is read as the empty file it is
    if path.resolve() == Path(os.devnull):
        text = ""
    else:
        text = read_regular(path, MAX_KNOWN_HOSTS_BYTES, "known_hosts").decode("utf-8")
    for lineno, raw in enumerate(text.splitlines(), 1):
        parsed = _parse_line(raw, lineno)
        if parsed is None:
            continue
        marker, entry = parsed
        if marker == "@revoked":
            revoked.add(key_id(entry.key))
        elif marker is None:
            trusted.append(entry)
    for entry in trusted:
        if key_id(entry.key) not in revoked:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return revoked


def _parse_line(raw: str, lineno: int) -> tuple[str | None, paramiko.hostkeys.HostKeyEntry] | None:
    """(marker or None, entry) for a host-key line; None for a comment, blank or damaged line."""
    line = raw.strip()
    if not line or line.startswith("#"):
        return None
    marker = None
    if line.startswith("@"):
        marker, _, line = line.replace("\t", " ").partition(" ")
        line = line.strip()
        if marker not in ("@revoked", "@cert-authority"):
            return None  # an unknown marker: OpenSSH ignores the line too
    try:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(line, lineno)
    except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError):
        return None
    if entry is None or entry.key is None:
        return None
    return marker, entry


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]  # paramiko is untyped
    """Decides about a key known_hosts does not trust: revoked keys always fail (even with
    first-use trust); otherwise refuse, or with `record_to` accept it once and append exactly
    one line for it.

    paramiko's AutoAddPolicy rewrites the whole file from what it parsed, which can silently
    drop lines it does not understand (@cert-authority, unsupported key types); appending
    leaves the operator's file as it was.
    """

    def __init__(self, revoked: set[tuple[str, str]], record_to: Path | None) -> None:
        self.revoked = revoked
        self.record_to = record_to

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if key_id(key) in self.revoked:
            raise RevokedHostKey(key)
        if self.record_to is None:
            raise paramiko.SSHException(f"Server {hostname!r} not found in known_hosts")
        client.get_host_keys().add(hostname, key.get_name(), key)
        with self.record_to.open("a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
