"""The agent's wire: each request carries an id, and a reply is used only when it answers it.

One JSON request goes to the agent (stdin) and one JSON reply comes back (stdout): a one-shot
agent's whole output, or one line of a session's (remote/agent_session.py). Matched by order
alone, anything else on that stream was taken for the reply: a stray line some library printed,
the agent's answer to garbage on its stdin, or the reply a session still owed an earlier call.
A deploy then read one call's reply as another's (a KeyError, exit 3, its lock left held and no
rollback). So a reply is used only when it is a JSON object with a boolean `ok`, the request's
`id`, and, for an op whose result the operator reads by key, those keys. Anything else is that
call's transport failure (AgentCallError, kind "transport"), which a deploy handles as it
handles an agent that died: the step fails and the deploy rolls back.

Both transports run the same agent (the zip is the operator's own, by its sha256), so a current
agent echoes the id locally and over SSH alike. The one reply without an id that is accepted is
an older agent's `stale_agent` refusal to a one-shot call: it refuses before any id is read, and
that refusal is what gets it replaced. A session runs only an agent of the operator's own zip
(its ready line names the zip's sha256), so a session reply without the id is never accepted.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote.base import CommandResult
from dsv4ops.remote.errors import AgentCallError
from dsv4ops.secrets import redact_text

T = TypeVar("T")

# What python prints when it cannot start the agent at all (missing, empty, or not a zip):
# only then is a call retried after an upload, never after a crash mid-operation.
NEVER_RAN = ("can't open file", "SyntaxError", "can't find '__main__' module")

# The keys of an op's result that the operator side reads by name (the Supervisor's typed
# methods, the kernel package commands): a reply without one is not that op's answer.
RESULT_KEYS: Mapping[str, frozenset[str]] = {
    "hello": frozenset({"sha256"}),
    "start": frozenset({"pid", "started_at", "argv", "env", "log_path"}),
    "stop": frozenset(
        {"pid", "pgid", "was_running", "signals", "left", "ports_open", "port_holders", "elapsed_s"}
    ),
    "kill": frozenset({"killed"}),
    "log_tail": frozenset({"text"}),
    "http": frozenset({"status", "body", "error", "elapsed_s"}),
    "http_many": frozenset({"replies"}),
    "wait_http": frozenset({"elapsed_s", "status", "attempts", "detected_at_monotonic"}),
    "preflight": frozenset({"host", "workdir", "writable", "writable_error", "ports", "gpus"}),
    "lock_release": frozenset({"released"}),
    "read_state": frozenset({"data"}),
    "kernels_present": frozenset({"present"}),
}
_EXCERPT = 60  # characters of an unreadable reply shown to the operator


@dataclass(frozen=True)
class Refusal:
    """The agent's well-formed "no" to this request: {"ok": false, "kind": ..., "error": ...}."""

    kind: str
    error: str
    reply: JSONObject


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def request(
    op: str, request_id: str, *, workdir: str, sha256: str, args: Mapping[str, object]
) -> str:
    """One request as the agent reads it (its id last, so no argument can replace it)."""
    return json.dumps(
        {"op": op, "workdir": workdir, "agent_sha256": sha256, **args, "id": request_id}
    )


def decode(
    text: str, *, op: str, request_id: str, host: str, older_agent: bool = False
) -> JSONObject | Refusal:
    """The agent's answer to request `request_id` in `text`: its result, or its refusal.

    `older_agent`: a one-shot call's output, where an older agent's `stale_agent` (no id) is
    accepted. Raises AgentCallError (kind "transport") for anything that is not that answer."""
    reply, why = _parse(text)
    if reply is not None:
        why = _not_the_answer(reply, request_id, older_agent)
    if why is not None or reply is None:
        raise unusable(host, op, why or "no reply")
    if reply["ok"] is not True:
        return Refusal(str(reply.get("kind") or "unknown"), str(reply.get("error")), reply)
    result = reply["result"]
    if not isinstance(result, dict):
        return {"value": result}  # an op whose answer is not an object (lock_info: null)
    missing = sorted(RESULT_KEYS.get(op, frozenset()) - result.keys())
    if missing:
        raise unusable(host, op, f"its result lacks {', '.join(missing)}")
    return result


def typed(host: str, op: str, convert: Callable[[], T]) -> T:
    """`convert()`, the typed reading of a reply (remote/replies.py); a value of the wrong type
    in it is that call's transport failure, never a KeyError or TypeError out of the CLI."""
    try:
        return convert()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise unusable(
            host, op, f"its result is not a {op} result ({type(exc).__name__})"
        ) from None


def unusable(host: str, op: str, why: str) -> AgentCallError:
    return AgentCallError(
        f"{host}: agent {op} failed: its output is not the answer to this request ({why}); "
        "whether it ran on the target is unknown",
        kind="transport",
    )


def outcome(
    res: CommandResult, *, op: str, request_id: str, host: str, from_session: bool, final: bool
) -> JSONObject | Refusal | None:
    """What one agent call's output means: its result, its refusal, or None (unless `final`)
    when the agent cannot have run at all (missing or unreadable zip: upload and retry). A
    crash mid-operation, a timeout or an unusable reply raises AgentCallError("transport")."""
    if res.stdout.strip() and not res.timed_out:
        try:
            return decode(
                res.stdout, op=op, request_id=request_id, host=host, older_agent=not from_session
            )
        except AgentCallError:
            if res.ok:  # the agent exited as it does after a reply: that output was its reply
                raise
    # Retry only when the agent cannot have run at all (missing, empty or unparsable file): a
    # crash mid-operation is reported, never repeated behind the caller's back.
    never_ran = not from_session and any(m in res.stderr for m in NEVER_RAN)
    empty = not from_session and res.ok and not res.stdout
    if not final and not res.timed_out and (never_ran or empty):
        return None
    what = "timed out" if res.timed_out else f"exit {res.exit_code}, no reply"
    raise AgentCallError(
        f"{host}: agent {op} failed ({what}): {res.stderr.strip()[-300:]}", kind="transport"
    )


def _parse(text: str) -> tuple[JSONObject | None, str | None]:
    try:
        reply = json.loads(text)
    except (ValueError, RecursionError):
        excerpt = redact_text(text.strip()[:_EXCERPT])
        more = "..." if len(text.strip()) > _EXCERPT else ""
        return None, f"not JSON: {excerpt!r}{more}"
    if not isinstance(reply, dict):
        return None, f"a JSON {type(reply).__name__}, not a reply object"
    return reply, None


def _not_the_answer(reply: JSONObject, request_id: str, older_agent: bool) -> str | None:
    """Why `reply` is not the answer to `request_id` (None: it is)."""
    ok = reply.get("ok")
    if not isinstance(ok, bool):
        return "no ok field"
    got = reply.get("id")
    if got != request_id:
        stale = not ok and reply.get("kind") == "stale_agent" and "id" not in reply
        if older_agent and stale:
            return None
        if got is None:
            return "a reply without this request's id"
        return "the reply to another request"
    if ok and "result" not in reply:
        return "no result"
    return None
