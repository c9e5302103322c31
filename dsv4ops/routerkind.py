"""Which router fronts the PD pair: the one place that says so (issue 43).

A profile chooses it (`router.kind`); the rendered deployment records it in its content, and
everything that talks to the router asks `Deployment.router_kind` rather than sniffing argv or
answers. The two differ in their command (module, flags, policies: profiles/flags.py holds each
one's flag table) and in how they answer (readiness, /workers, status codes), which the code that
depends on it reads from here.

Bottom layer: pure data, no imports from the package.
"""

from __future__ import annotations

from enum import StrEnum


class RouterKind(StrEnum):
    # What the box runs today (January 2026), pinned in pyproject's `router` extra.
    SGLANG_ROUTER = "sglang-router"
    # Shepherd Model Gateway (PyPI `smg`), the router's own project since; its own venv
    # (.venv-smg, `make install`): its `smg` console script clashes with sglang-router's.
    SMG = "smg"

    @property
    def module(self) -> str:
        """What `python -m` runs: both launchers take the same PD argv shape."""
        return _MODULES[self]

    @property
    def label(self) -> str:
        """The router and its pinned version, as messages name it."""
        return _LABELS[self]

    @property
    def thinking_off_explicit(self) -> bool:
        """Whether a request that does not reason must say so (`chat_template_kwargs:
        {"thinking": false}`). SMG 1.13.0 applies DeepSeek's API rules to a model it serves as
        deepseek-v4-flash: no `thinking` means thinking on, and a forced tool call
        (tool_choice: required) with thinking on is refused, 400 tool_choice_not_supported,
        before any worker sees it. sglang-router 0.3.2 passes the request to SGLang as is,
        where DSV4 reasons only when asked (measured on the twin behind each, 2026-12-06)."""
        return self is RouterKind.SMG

    @property
    def other(self) -> RouterKind:
        return RouterKind.SMG if self is RouterKind.SGLANG_ROUTER else RouterKind.SGLANG_ROUTER

    @classmethod
    def recorded(cls, value: object) -> RouterKind:
        """The kind a journal record or resolved profile names; records written before the
        choice existed ran sglang-router, the only router then."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.SGLANG_ROUTER


DEFAULT_ROUTER_KIND = RouterKind.SGLANG_ROUTER
SMG_VERSION = "1.13.0"  # also in Makefile's SMG_PIN and profiles/_smg_flag_table.py (a test checks)

_MODULES = {
    RouterKind.SGLANG_ROUTER: "sglang_router.launch_router",
    RouterKind.SMG: "smg.launch_router",
}
_LABELS = {
    RouterKind.SGLANG_ROUTER: "sglang-router 0.3.2",
    RouterKind.SMG: f"SMG {SMG_VERSION}",
}
