"""The values `export rbg` takes from its options, checked by Kubernetes' own rules before any
manifest is built, so an invalid one is refused (exit 1, naming the option) instead of printed.

* `--namespace`: a DNS-1123 label (k8s.io/apimachinery `IsDNS1123Label`: at most 63 of
  `[a-z0-9-]`, alphanumeric at both ends); `--name` is `rbg.group_name`'s (a shorter label).
* `--image`, `--router-image`, `--kernel-image`: a container image reference as the kubelet and
  containerd parse it (github.com/distribution/reference `ReferenceRegexp`, whole string, no trailing newline: `[host[:port]/]path
  [:tag][@digest]`, lowercase path components, tag `[\\w][\\w.-]{0,127}`, name at most 255).
* `--python`: `command[0]` of every container. Kubernetes execs it without a shell, but a
  value with whitespace or shell metacharacters (`python3; rm -rf /`) is never an interpreter and
  turns dangerous the moment anyone wraps the command in `sh -c`: a bare name or an absolute
  path of `[A-Za-z0-9_.+/-]`, not starting with `-`.
* the kernel package `name@version` the init container's `sh -c` copies: plain names only.
"""

from __future__ import annotations

import re

from dsv4ops.errors import DsOpsError

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)
_MAX_IMAGE_NAME = 255
_PROGRAM = re.compile(r"^[A-Za-z0-9_.+/-]+$")
_PACKAGE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def check_namespace(value: str | None) -> None:
    if value is None:
        return
    if len(value) > 63 or not _DNS1123_LABEL.fullmatch(value):
        raise DsOpsError(
            f"--namespace {_shown(value)}: a Kubernetes namespace is a DNS-1123 label (at most 63 "
            "lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )


def check_image(option: str, value: str) -> None:
    m = _IMAGE.fullmatch(value) if len(value) <= 2 * _MAX_IMAGE_NAME + 200 else None
    if m is None or len(m.group("name")) > _MAX_IMAGE_NAME:
        raise DsOpsError(
            f"{option} {_shown(value)}: not a container image reference "
            "([registry[:port]/]repository[:tag][@sha256:digest], lowercase repository, no spaces)",
            hint="e.g. lmsysorg/sglang:v0.5.23 or registry.example.com:5000/team/sglang@sha256:...",
        )


def check_program(value: str) -> None:
    if not _PROGRAM.fullmatch(value) or value.startswith("-") or "//" in value:
        raise DsOpsError(
            f"--python {_shown(value)}: the interpreter becomes every container's command[0]; "
            "give a program name or an absolute path (letters, digits, '_', '.', '+', '-', '/'), "
            "no spaces or shell characters",
            hint="e.g. --python python3 or --python /usr/bin/python3",
        )


def check_package(ref: str) -> None:
    name, _, version = ref.partition("@")
    if not (_PACKAGE_PART.fullmatch(name) and _PACKAGE_PART.fullmatch(version)) or ".." in ref:
        raise DsOpsError(
            f"kernel package {_shown(ref)}: the init container copies it by name@version; "
            "both must be plain names (letters, digits, '.', '_', '+', '-')"
        )
