"""The twin's outward surface held against SGLang 0.5.23's, as the committed fixture records it.

`fixtures/sglang_0_5_23_surface.json` is extracted from the real wheel by
tools/extract_twin_conformance.py (docs/twin.md, "Conformance"; its own tests are in
conformance_extractor_test.py); CI has no wheel and uses the committed file. A real prefill + decode twin pair is started once; its routes, /metrics (parsed
by prometheus_client's parser) and chat streams must be SGLang's. Every difference is either an
xfail naming who fixes it (issue 10) or an allow-list entry below with its reason; an allow-list
entry the twin no longer needs fails, so the lists cannot go stale.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import dsv4ops
from testing.twin import WEATHER_TOOL, fake_bootstrap, sse_events, twin_stack

SURFACE_PATH = Path(__file__).parent / "fixtures" / "sglang_0_5_23_surface.json"
SURFACE = json.loads(SURFACE_PATH.read_text())

SERVED_NAME = "deepseek-v4-flash"  # profiles/baseline.yaml served_name
TWIN_ARGS = [
    "--enable-metrics",
    "--tool-call-parser",
    "deepseekv4",
    "--served-model-name",
    SERVED_NAME,
]
ENV = {"DSV4_TWIN_TIME_SCALE": "0.05", "DSV4_TWIN_HAZARDS": "off"}
CALL_ARGS = {"city": "Paris", "nonce": "conformance-1"}
ROLES = ("prefill", "decode")

# Twin endpoints SGLang does not have, each with why it stays.
TWIN_ONLY = {
    ("GET", "/_twin/state"): "the twin's own inspection endpoint (docs/twin.md); never on the box",
    ("POST", "/_twin/hazard"): "switches the twin's failure modes at run time; never on the box",
}
# aiohttp's add_get also answers HEAD; FastAPI's @app.get does not (only `/` has @app.head).
# Nothing in dsv4ops or the router sends HEAD, so nobody is changing it.
HEAD_ALLOWED = "aiohttp serves HEAD on every GET route; unused by dsv4ops and the router"
# Endpoints dsv4ops itself calls on a worker: (method, path) → (probe body, who calls it).
OPERATOR_ENDPOINTS: dict[tuple[str, str], tuple[Any, str]] = {
    ("GET", "/health"): (None, "orchestrate/plan.py, orchestrate/status.py readiness"),
    ("GET", "/server_info"): (None, "orchestrate/status.py, plan.py checks"),
    ("GET", "/metrics"): (None, "canary/sampler.py, orchestrate/engine.py"),
    ("GET", "/v1/models"): (None, "canary/suites/common.py preflight"),
    ("POST", "/v1/chat/completions"): (
        {"messages": [{"role": "user", "content": "SAY ok"}], "max_tokens": 2, **fake_bootstrap()},
        "canary/loadgen.py, orchestrate/probe.py",
    ),
    ("POST", "/abort_request"): (
        {"rid": "conformance-no-such-rid", "abort_all": False},
        "canary/suites/abort_cascade.py",
    ),
}
# Metrics dsv4ops (or its alerts) reads: family or sample name → (roles, why). Names found in
# dsv4ops's own code are added by `_metrics_dsv4ops_names` (both roles).
REQUIRED_METRICS: dict[str, tuple[tuple[str, ...], str]] = {
    "sglang:num_running_reqs": (ROLES, "metrics/prom.py RUNNING"),
    "sglang:num_queue_reqs": (ROLES, "metrics/prom.py QUEUED"),
    "sglang:gen_throughput": (ROLES, "metrics/prom.py GEN_THROUGHPUT"),
    "sglang:num_aborted_requests_total": (ROLES, "metrics/prom.py ABORTED_TOTAL"),
    "sglang:generation_tokens_total": (ROLES, "metrics/prom.py GEN_TOKENS_TOTAL"),
    "sglang:realtime_tokens_total": (
        ROLES,
        "progress counter for wedge detection (next-anchors §0.3)",
    ),
    "sglang:num_transfer_failed_reqs_total": (ROLES, "PD degrade alert; bumped on both sides"),
    "sglang:num_bootstrap_failed_reqs_total": (ROLES, "PD degrade alert; bumped on both sides"),
    "sglang:num_prefill_bootstrap_queue_reqs": (("prefill",), "PD queue-stuck alert"),
    "sglang:num_decode_transfer_queue_reqs": (("decode",), "PD queue-stuck alert"),
}
# Label values a role must show after the traffic below (SGLang bumps these modes there).
REQUIRED_VALUES = {
    ("sglang:realtime_tokens_total", "decode"): {"mode": {"decode"}},
    ("sglang:realtime_tokens_total", "prefill"): {"mode": {"prefill_compute"}},
}
XFAIL_METRICS: dict[tuple[str, str], str] = {}  # (name, role) → reason; issue 10's landed
# Stream keys the twin lacks that nobody is changing: (chunk kind, level, key) → reason.
KEY_GAPS: dict[tuple[str, str, str], str] = {}
CHUNK_XFAILS: dict[str, str] = {}  # issue 10's chunk fixes landed (twin/formats.py)


# --- the twin against the fixture ------------------------------------------------------------


def _claims() -> dict[str, set[tuple[str, str]]]:
    """(method, path) of every route the twin's app registers, per role, from its own code."""
    from dsv4ops.twin.args import parse_args
    from dsv4ops.twin.config import TwinConfig
    from dsv4ops.twin.http_app import build_app
    from dsv4ops.twin.kernel_package import resolve_kernel_config
    from dsv4ops.twin.server import TwinServer

    out = {}
    for role in ROLES:
        args = parse_args(
            ["--model-path", "/models/m", "--port", "1", "--disaggregation-mode", role, *TWIN_ARGS]
        )
        app = build_app(TwinServer(args, TwinConfig(), {}, resolve_kernel_config({})))
        routes = set()
        for r in app.router.routes():
            assert r.resource is not None  # every route the twin's app adds is on a resource
            routes.add((r.method, r.resource.canonical))
        out[role] = routes
    return out


async def _stream(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[Any]:
    async with client.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}
    ) as r:
        assert r.status_code == 200, await r.aread()
        return sse_events([line async for line in r.aiter_lines()])


async def _abort_one(client: httpx.AsyncClient, url: str) -> None:
    """A graceful abort, so the aborted-requests counter has a sample."""
    body = {
        "messages": [{"role": "user", "content": "write"}],
        "max_tokens": 4000,
        "rid": "conformance-abort",
        "stream": True,
        **fake_bootstrap(),
    }
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        lines = r.aiter_lines()
        async for line in lines:
            if line.startswith("data:"):
                break
        await client.post(url + "/abort_request", json={"rid": "conformance-abort"})
        async for _ in lines:
            pass


async def _traffic(prefill: str, decode: str, bootstrap_port: int) -> dict[str, list[Any]]:
    plain = {
        "messages": [{"role": "user", "content": "SAY hello conformance"}],
        "stream_options": {"include_usage": True},
        **fake_bootstrap(),
    }
    tool = {
        "messages": [{"role": "user", "content": "CALL get_weather " + json.dumps(CALL_ARGS)}],
        "tools": [WEATHER_TOOL],
        **fake_bootstrap(),
    }
    pd = {
        "messages": [{"role": "user", "content": "write"}],
        "max_tokens": 128,
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": bootstrap_port,
        "bootstrap_room": 4242,
    }
    async with httpx.AsyncClient(timeout=60.0) as client:
        streams = {
            "plain": await _stream(client, decode, plain),
            "tool": await _stream(client, decode, tool),
        }
        # One real PD request (128 decode steps, past SGLang's 40-step log interval).
        replies = await asyncio.gather(
            *(client.post(u + "/v1/chat/completions", json=pd) for u in (prefill, decode))
        )
        assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
        await _abort_one(client, decode)
    return streams


def _probe(url: str, claims: set[tuple[str, str]]) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    with httpx.Client(timeout=10.0) as client:
        for method, path in sorted(claims):
            if method == "HEAD":
                continue
            target = path.replace("{model}", SERVED_NAME)
            out[(method, path)] = client.request(
                method, url + target, content=b"" if method != "GET" else None
            ).status_code
        for (method, path), (body, _) in OPERATOR_ENDPOINTS.items():
            out[("operator", method, path)] = client.request(
                method, url + path, json=body
            ).status_code
    return out


@pytest.fixture(scope="module")
def observed() -> dict[str, Any]:
    claims = _claims()
    with twin_stack(prefill_args=TWIN_ARGS, decode_args=TWIN_ARGS, env=ENV) as stack:
        urls = {"prefill": stack.prefill.url, "decode": stack.decode.url}
        streams = asyncio.run(
            _traffic(urls["prefill"], urls["decode"], stack.prefill.bootstrap_port or 0)
        )
        metrics = {
            role: httpx.get(url + "/metrics", timeout=10.0).text for role, url in urls.items()
        }
        served = {role: _probe(url, claims[role]) for role, url in urls.items()}
    families = {
        role: {f.name: f for f in text_string_to_metric_families(text)}
        for role, text in metrics.items()
    }
    return {"claims": claims, "served": served, "families": families, "streams": streams}


def _template(path: str) -> str:
    """`/v1/models/{model:path}` and `/v1/models/{model}` → `/v1/models/{}`.

    (SGLang's `:path` also matches a model id with slashes; the twin's `{model}` does not. The
    profiles serve `deepseek-v4-flash`, so nobody is changing it.)
    """
    return re.sub(r"\{[^}]*\}", "{}", path)


def _sglang_has(method: str, path: str) -> bool:
    return any(
        _template(e["path"]) == _template(path)
        and (method in e["methods"] or e["methods"] == ["*"])
        for e in SURFACE["endpoints"]
    )


@pytest.mark.slow
def test_every_endpoint_the_twin_claims_is_an_sglang_endpoint_and_answers(
    observed: dict[str, Any],
) -> None:
    problems, used = [], set()
    for role, claims in observed["claims"].items():
        for method, path in sorted(claims):
            if (method, path) in TWIN_ONLY:
                used.add((method, path))
            elif method == "HEAD":
                continue  # HEAD_ALLOWED
            elif not _sglang_has(method, path):
                problems.append(f"{role}: {method} {path} is not an SGLang 0.5.23 endpoint")
            if method != "HEAD" and observed["served"][role][(method, path)] in (404, 405):
                problems.append(f"{role}: {method} {path} is registered but not served")
    assert not problems, "\n".join(problems)
    assert used == set(TWIN_ONLY), f"stale TWIN_ONLY entries: {set(TWIN_ONLY) - used}"
    assert HEAD_ALLOWED and any(m == "HEAD" for c in observed["claims"].values() for m, _ in c)


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", sorted(OPERATOR_ENDPOINTS), ids=" ".join)
def test_endpoints_dsv4ops_calls_are_sglang_endpoints_the_twin_serves(
    observed: dict[str, Any], role: str, endpoint: tuple[str, str]
) -> None:
    method, path = endpoint
    assert _sglang_has(method, path), f"{method} {path} ({OPERATOR_ENDPOINTS[endpoint][1]})"
    assert observed["served"][role][("operator", method, path)] == 200


def _by_family() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in SURFACE["metrics"]:
        out[m["family"]].append(m)
    return out


def _label_names(family: Any) -> set[str] | None:
    """Label names of a parsed family's samples (bucket `le` / `quantile` aside); None if none.

    `_created` samples are skipped: SGLang's MultiProcessCollector drops them, the twin's plain
    registry writes them; PromQL never reads them, and nobody is changing it.
    """
    names: set[str] = set()
    samples = [s for s in family.samples if not s.name.endswith("_created")]
    for s in samples:
        skip = (
            {"le"}
            if s.name.endswith("_bucket")
            else {"quantile"}
            if family.type == "summary"
            else set()
        )
        names |= set(s.labels) - skip
    return names if samples else None


def _created_series(family: Any) -> bool:
    """The twin's plain registry writes `<counter/histogram>_created` gauges; SGLang's
    MultiProcessCollector does not. PromQL in dsv4ops never reads them; nobody is changing it."""
    base = _by_family().get(family.name.removesuffix("_created"), [])
    return (
        family.name.endswith("_created")
        and family.type == "gauge"
        and any(e["type"] in ("counter", "histogram", "summary") for e in base)
    )


def _metric_problem(family: Any) -> str | None:
    entries = _by_family().get(family.name)
    if not entries and _created_series(family):
        return None
    if not entries:
        return f"{family.name} is not an SGLang 0.5.23 metric"
    seen = _label_names(family)
    wanted = []
    for e in entries:
        # On the box a gauge in multiprocess mode all/liveall keeps a `pid` label.
        want = set(e["labels"] or ()) | ({"pid"} if e.get("pid_label") else set())
        wanted.append(f"{e['type']} {sorted(want)} ({e['source']})")
        if e["type"] != family.type or e["labels"] is None:
            continue
        optional = set(SURFACE["metric_label_sets"].get(e.get("label_set"), {}).get("optional", ()))
        if seen is None or want <= seen <= want | optional:
            return None
    got = f"{family.type} {sorted(seen) if seen is not None else '(no samples)'}"
    return f"{family.name}: twin {got}; SGLang " + " or ".join(wanted)


def test_the_metric_check_catches_wrong_names_types_and_labels() -> None:
    base = 'model_name="m",engine_type="decode",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    text = (
        f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{base}}} 1\n"
        f"# TYPE sglang:num_queue_reqs counter\nsglang:num_queue_reqs_total{{{base}}} 1\n"
        '# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{model_name="m"} 1\n'
        "# TYPE sglang:made_up gauge\nsglang:made_up 1\n"
        f"# TYPE sglang:num_retracted_reqs gauge\nsglang:num_retracted_reqs{{{base}}} 0\n"
    )
    found = {f.name: _metric_problem(f) for f in text_string_to_metric_families(text)}
    assert found["sglang:num_running_reqs"] is None
    assert "twin counter" in (found["sglang:num_queue_reqs"] or "")
    assert "['model_name']" in (found["sglang:gen_throughput"] or "")
    assert "not an SGLang 0.5.23 metric" in (found["sglang:made_up"] or "")
    # A gauge in multiprocess mode "all" keeps a pid label on the box.
    assert "pid" in (found["sglang:num_retracted_reqs"] or "")


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_every_metric_the_twin_exposes_has_sglangs_name_type_and_labels(
    observed: dict[str, Any], role: str
) -> None:
    problems = [p for f in observed["families"][role].values() if (p := _metric_problem(f))]
    assert not problems, "\n".join(problems)


def _metrics_dsv4ops_names() -> set[str]:
    """`"sglang:..."` literals in dsv4ops's own code (the twin aside): what it reads."""
    root = Path(dsv4ops.__file__).parent
    found: set[str] = set()
    for path in root.rglob("*.py"):
        if "twin" not in path.relative_to(root).parts:
            found |= set(re.findall(r"[\"'](sglang:[A-Za-z_:]+)[\"']", path.read_text()))
    return found


def _required_params() -> list[Any]:
    required = dict(REQUIRED_METRICS)
    for name in sorted(_metrics_dsv4ops_names() - set(required)):
        required[name] = (ROLES, "named in dsv4ops's code")
    return [
        pytest.param(
            name,
            role,
            marks=[pytest.mark.xfail(strict=True, reason=XFAIL_METRICS[(name, role)])]
            if (name, role) in XFAIL_METRICS
            else [],
            id=f"{name}-{role}",
        )
        for name, (roles, _) in sorted(required.items())
        for role in roles
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "role"), _required_params())
def test_metrics_dsv4ops_relies_on_are_in_sglang_and_on_the_twin(
    observed: dict[str, Any], name: str, role: str
) -> None:
    entries = [m for m in SURFACE["metrics"] if name in (m["name"], m["family"])]
    assert entries, f"dsv4ops reads {name}, which SGLang 0.5.23 does not define"
    family = observed["families"][role].get(entries[0]["family"])
    assert family is not None, f"the {role} twin does not expose {name} ({entries[0]['source']})"
    assert _metric_problem(family) is None, _metric_problem(family)
    values: dict[str, set[str]] = defaultdict(set)
    for s in family.samples:
        for label, value in s.labels.items():
            values[label].add(value)
    for label, allowed in entries[0].get("label_values", {}).items():
        assert values[label] <= set(allowed), (name, label, values[label], allowed)
    for label, needed in REQUIRED_VALUES.get((name, role), {}).items():
        assert needed <= values[label], f"{role} {name}: no sample with {label}={needed}"


# --- the chat stream ------------------------------------------------------------------------


def _kind(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices")
    if not choices:
        return "usage" if choices == [] and "usage" in chunk else "other"
    choice, delta = choices[0], choices[0].get("delta") or {}
    if delta.get("tool_calls"):
        return "tool_call"
    if choice.get("finish_reason") is not None:
        return "finish"
    if "role" in delta:
        return "role"
    return "content" if delta.get("content") else "other"


def _key_problems(kind: str, level: str, obj: Any, want: dict[str, list[str]]) -> set[str]:
    if not isinstance(obj, dict):
        return {f"{kind}.{level} is {obj!r}, not an object"}
    keys, must, may = set(obj), set(want["keys"]), set(want["keys"]) | set(want["optional"])
    return {f"{kind}.{level} lacks {k!r}" for k in must - keys} | {
        f"{kind}.{level} has {k!r}, which SGLang never writes" for k in keys - may
    }


def _levels(kind: str, chunk: dict[str, Any]) -> list[tuple[str, Any]]:
    fx = SURFACE["chat_stream"][kind]
    out = [("chunk", chunk)]
    if kind == "usage":
        return [*out, ("usage", chunk.get("usage"))]
    choice = chunk["choices"][0]
    out += [("choice", choice), ("delta", choice.get("delta"))]
    if kind == "tool_call":
        for call in choice["delta"]["tool_calls"]:
            out += [("tool_call", call), ("function_keys", call.get("function"))]
    return [(level, obj) for level, obj in out if level in fx]


def _chunk_params() -> list[Any]:
    kinds = ("role", "content", "finish", "tool_call", "usage")
    return [
        pytest.param(
            k,
            id=k,
            marks=[pytest.mark.xfail(strict=True, reason=CHUNK_XFAILS[k])]
            if k in CHUNK_XFAILS
            else [],
        )
        for k in kinds
    ]


@pytest.mark.slow
@pytest.mark.parametrize("kind", _chunk_params())
def test_chat_stream_chunks_have_sglangs_keys(observed: dict[str, Any], kind: str) -> None:
    chunks = [c for s in observed["streams"].values() for c in s if c != "[DONE]"]
    assert [c for c in chunks if _kind(c) == "other"] == [], "chunks SGLang never sends"
    mine = [c for c in chunks if _kind(c) == kind]
    assert mine, f"the twin sent no {kind} chunk"
    problems: set[str] = set()
    for chunk in mine:
        for level, obj in _levels(kind, chunk):
            problems |= _key_problems(kind, level, obj, SURFACE["chat_stream"][kind][level])
    gaps = {f"{k}.{level} lacks {key!r}" for (k, level, key) in KEY_GAPS if k == kind}
    assert gaps <= problems, f"stale KEY_GAPS entries: {gaps - problems}"
    assert problems - gaps == set(), "\n".join(sorted(problems - gaps))


def _tool_deltas(observed: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for c in observed["streams"]["tool"]
        if c != "[DONE]" and _kind(c) == "tool_call"
        for call in c["choices"][0]["delta"]["tool_calls"]
    ]


@pytest.mark.slow
def test_tool_call_id_type_and_finish_reason_have_sglangs_shape(observed: dict[str, Any]) -> None:
    fx = SURFACE["tool_call_delta"]
    first = _tool_deltas(observed)[0]
    assert re.fullmatch(fx["id"]["pattern"], first["id"]), first
    assert first["type"] == fx["type"] and first["index"] == 0
    assert first["function"]["name"] == "get_weather"
    finishes = [
        c["choices"][0]["finish_reason"]
        for c in observed["streams"]["tool"]
        if c != "[DONE]" and _kind(c) == "finish"
    ]
    assert finishes == ["tool_calls"]


@pytest.mark.slow
def test_a_tool_call_streams_as_the_recipe_path_serves_it(observed: dict[str, Any]) -> None:
    # 0.5.23 serves --tool-call-parser deepseekv4 through deepseek-recipe (served_by): the call
    # is streamed in pieces, a header with id and name, then the arguments (twin/recipe.py)
    fx = SURFACE["tool_call_delta"]
    assert fx["one_delta_per_call"] is False and fx["served_by"]["encoding_spec"] == "dsv4"
    deltas = _tool_deltas(observed)
    assert len(deltas) > 2, deltas
    assert all(
        sorted(d) == fx["keys"] and sorted(d["function"]) == fx["function_keys"] for d in deltas
    )
    header, *rest = deltas
    assert header["function"]["name"] == "get_weather" and header["function"]["arguments"] == ""
    assert all(d["id"] is None and d["function"]["name"] is None for d in rest)
    assert json.loads("".join(d["function"]["arguments"] for d in rest)) == CALL_ARGS
