"""Which router fronts the PD pair: the one place that says so (issue 43).

A profile chooses it (`router.kind`); the rendered deployment records it in its content, and
everything that talks to the router asks `Deployment.router_kind` rather than sniffing argv or
answers. The two differ in their command (module, flags, policies: profiles/flags.py holds each
one's flag table) and in how they answer (readiness, /workers, status codes), which the code that
depends on it reads from here.

Bottom layer: pure data, no imports from the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
    def metrics(self) -> RouterMetrics:
        """The Prometheus names of this router that the rules, the dashboard and watch read."""
        return _METRICS[self]

    @property
    def image(self) -> str | None:
        """The container image `export rbg` runs this router from, or None where no image could
        be verified for the pinned version: the operator names one (`--router-image`)."""
        return _IMAGES[self]

    @property
    def request_ids(self) -> RequestIds:
        """Which of a client's request ids this router lets reach the workers."""
        return _REQUEST_IDS[self]

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


@dataclass(frozen=True)
class RouterMetrics:
    """What dsv4ops reads from a router's Prometheus port.

    Scraped from each behind the twin (2026-12-06; docs/monitoring.md "The router's metrics"):
    sglang-router 0.3.2 and SMG 1.13.0 name the two families alike; SMG labels each answer with
    the route it answered (`path`, "other" for an unknown one), 0.3.2 does not. Both count their
    own probe answers (a /readiness 503 while a worker is down) with the clients': only SMG's
    can be told apart, and are left out of the 5xx that clients saw.
    """

    worker_health: str  # gauge per `worker` (its URL): 1 passes the router's health checks
    responses: str  # counter of the router's HTTP answers, by `status_code`
    own_paths: tuple[str, ...]  # `path` of the router's own probe answers; () = no `path` label

    def client_5xx(self) -> str:
        """PromQL selector of the 5xx answers clients got."""
        own = f',path!~"{"|".join(self.own_paths)}"' if self.own_paths else ""
        return f'{self.responses}{{status_code=~"5.."{own}}}'

    def is_client_5xx(self, labels: Mapping[str, str]) -> bool:
        """The same test on one scraped sample's labels (watch)."""
        return labels.get("status_code", "").startswith("5") and (
            labels.get("path", "") not in self.own_paths
        )


@dataclass(frozen=True)
class RequestIds:
    """What a router passes on of a client's request ids; what `POST /abort_request {"rid"}` on a
    worker can match (the canary's abort cascade), and what a worker's log can be searched by.

    Observed through each router on the twin (2026-12-06, tests/cli/deploy_smg_test.py): a
    streaming chat completion with `rid` in its body and an `X-Request-ID` header, read back from
    the decode's `/_twin/state` while it streams.
    """

    # a `rid` in a /v1/chat/completions body reaches the decode, which serves the stream (and
    # names its chunks) under it; False: the decode serves it under its own `chatcmpl-…` id,
    # which only the stream's chunk `id` tells. (/v1/completions and /generate keep it behind both.)
    chat_rid_kept: bool
    # the client's X-Request-ID header reaches both workers (and comes back on the answer). SGLang
    # 0.5.23 reads no such header (its id is the body's `rid`): it ties logs together, never an abort.
    header_forwarded: bool


DEFAULT_ROUTER_KIND = RouterKind.SGLANG_ROUTER
SMG_VERSION = "1.13.0"  # also in Makefile's SMG_PIN and profiles/_smg_flag_table.py (a test checks)

_MODULES = {
    RouterKind.SGLANG_ROUTER: "sglang_router.launch_router",
    RouterKind.SMG: "smg.launch_router",
}
_REQUEST_IDS = {
    # 0.3.2 re-serializes chat bodies into typed structs that have no `rid`
    RouterKind.SGLANG_ROUTER: RequestIds(chat_rid_kept=False, header_forwarded=True),
    RouterKind.SMG: RequestIds(chat_rid_kept=True, header_forwarded=True),
}
_LABELS = {
    RouterKind.SGLANG_ROUTER: "sglang-router 0.3.2",
    RouterKind.SMG: f"SMG {SMG_VERSION}",
}
# The router's container image for `export rbg` (its command is the box's argv, the interpreter
# swapped for the image's). SMG: none is pinned. Its project publishes lightseekorg/smg:<version>
# (bare version; its docs) and its docker/Dockerfile's router image runs `python3 -m
# smg.launch_router` (read 2026-12-06), but no 1.13.0 tag or digest could be verified (no registry
# is reachable from here); a guessed image would fail only at the cluster's pull, so an smg export
# asks for --router-image instead (docs/kubernetes.md).
_IMAGES: dict[RouterKind, str | None] = {
    RouterKind.SGLANG_ROUTER: "lmsysorg/sglang-router:v0.3.2",
    RouterKind.SMG: None,
}

_PROBE_PATHS = (
    "/health",
    "/liveness",
    "/readiness",
)  # the router's own; /health_generate asks a worker
_METRICS = {
    RouterKind.SGLANG_ROUTER: RouterMetrics("smg_worker_health", "smg_http_responses_total", ()),
    RouterKind.SMG: RouterMetrics("smg_worker_health", "smg_http_responses_total", _PROBE_PATHS),
}
