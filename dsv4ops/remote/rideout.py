"""Riding out a dropped connection: which agent calls may be sent again, and for how long.

An SSH target's connection can blip for seconds (a switch, a VPN re-key) while a deploy waits
for a server to come up. Failing the deploy there, and usually its automatic rollback with it,
leaves the box in whatever state the blip found it. So a call that lost its connection
(ConnectionLostError, remote/ssh.py) is sent again once the target answers, but only when that
cannot do a thing twice:

* a call that certainly never reached the target (`sent` False): any op;
* a call that may have run: only an op that changes nothing (`READS`), an HTTP request that is
  a GET or HEAD, a readiness wait (with what is left of its own deadline; once that has passed,
  one last look, so the caller gets the wait's own answer, ready or timed out, and a deploy
  that waits in slices goes on with its next slice), a journal append marked `again` (the
  agent appends it only when the journal does not already hold those lines), and the ops that
  are idempotent by design (a merge appends only the records the journal lacks; a state file
  replaced by the same data).

Everything else that may have run (start, stop, kill, the lock, a kernel install) raises the
original error: whether it ran is for the operator to see, not for a retry to guess.

The budget is one deadline per outage (`ssh.reconnect_s`), shared by every call made during it,
so a box that stays away is reported once it has been away that long, not after a timeout per
call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from dsv4ops.clock import Clock
from dsv4ops.errors import ConnectionLostError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote.errors import AgentCallError

# Ops that only read the target: sending one twice is asking twice.
READS = frozenset(
    {
        "hello",
        "status",
        "log_tail",
        "preflight",
        "lock_info",
        "journal_read",
        "read_state",
        "kernels_list",
        "kernels_present",
        "kernels_probe",
        "diagnostics",
    }
)
# Ops whose second run does what the first did, nothing more.
IDEMPOTENT = frozenset({"journal_merge", "write_state"})
_SAFE_METHODS = frozenset({"GET", "HEAD"})
# Pauses between attempts while the target is away: quick first (a blip), then every 2 s.
_PAUSES_S = (0.2, 0.5, 1.0, 2.0)
# A wait whose deadline passed during the outage is sent once more for this long: a few polls.
_LAST_LOOK_S = 0.5


def resend(
    op: str,
    args: Mapping[str, object],
    timeout: float,
    *,
    sent: bool,
    spent_s: float,
) -> tuple[dict[str, object], float] | None:
    """The (args, transport timeout) to send `op` again with, `spent_s` seconds after it was
    first sent; None when it must not be sent again."""
    again = dict(args)
    if op == "wait_http":
        # A wait keeps its own deadline: what the outage took comes out of it.
        wait_s = args.get("timeout_s")
        if not isinstance(wait_s, int | float):
            return None
        left = max(float(wait_s) - spent_s, _LAST_LOOK_S)
        again["timeout_s"] = left
        return again, timeout - float(wait_s) + left  # the transport's margin stays as it was
    if not sent or op in READS or op in IDEMPOTENT:
        return again, timeout
    if op == "http":
        return (again, timeout) if _safe(args) else None
    if op == "http_many":
        items = args.get("requests")
        if isinstance(items, list) and all(isinstance(i, dict) and _safe(i) for i in items):
            return again, timeout
        return None
    if op == "journal_append":
        again["again"] = True  # the agent skips lines the journal already ends with
        return again, timeout
    return None


def _safe(request: Mapping[str, object]) -> bool:
    method = request.get("method", "GET")
    return isinstance(method, str) and method.upper() in _SAFE_METHODS


class Outage:
    """The target being away: one deadline from the first lost call, pauses between tries, and
    a word to the operator when it goes and when it comes back."""

    def __init__(
        self,
        where: str,
        budget_s: float,
        clock: Clock,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.where = where
        self.budget_s = budget_s
        self._clock = clock
        self._notify = notify or (lambda _message: None)
        self._began: float | None = None
        self._tries = 0
        self._lock = threading.Lock()  # one Supervisor may be called from several threads

    def pause(self, exc: ConnectionLostError) -> None:
        """Wait before the next try; re-raises `exc` once the outage has lasted its budget."""
        if self.budget_s <= 0:
            raise exc
        with self._lock:
            now = self._clock.monotonic()
            first = self._began is None
            if self._began is None:
                self._began, self._tries = now, 0
            began, tries = self._began, self._tries
            self._tries += 1
            left = began + self.budget_s - now
            if left <= 0:
                self._began = None
        if first:
            self._notify(
                f"{self.where}: connection lost ({exc}); retrying for up to {self.budget_s:g} s"
            )
        if left <= 0:
            raise ConnectionLostError(
                f"{exc} (the target stayed away {now - began:.0f} s, more than "
                f"ssh.reconnect_s = {self.budget_s:g} s)",
                sent=exc.sent,
                hint=exc.hint
                or "check the network path to the target, then see `dsv4ops status` "
                "for the state it is in",
            ) from None
        self._clock.sleep(min(_PAUSES_S[min(tries, len(_PAUSES_S) - 1)], left))

    def over(self) -> None:
        """The target answered: the outage, if there was one, has ended."""
        with self._lock:
            began, self._began = self._began, None
        if began is not None:
            away = self._clock.monotonic() - began
            self._notify(f"{self.where}: connection is back after {away:.1f} s")

    def forget(self) -> None:
        """A call ended some other way (an error that is no answer): no word either way."""
        with self._lock:
            self._began = None


def call(
    op: str,
    args: Mapping[str, object],
    timeout: float,
    once: Callable[[str, float, Mapping[str, object]], JSONObject],
    outage: Outage,
    clock: Clock,
) -> tuple[JSONObject, float]:
    """`once(op, timeout, args)`, sent again after a lost connection while `resend` allows and
    the outage's budget lasts. Returns the result and the seconds spent before the attempt that
    gave it (an AgentCallError carries them as `waited_before_s`)."""
    t0 = clock.monotonic()
    spent, send, send_timeout = 0.0, args, timeout
    sent = False  # whether any attempt so far may have reached the target
    while True:
        try:
            result = once(op, send_timeout, send)
        except ConnectionLostError as exc:
            sent = sent or exc.sent
            if resend(op, args, timeout, sent=sent, spent_s=clock.monotonic() - t0) is None:
                outage.forget()
                raise
            outage.pause(exc)
            spent = clock.monotonic() - t0
            again = resend(op, args, timeout, sent=sent, spent_s=spent)
            if again is None:  # cannot happen: only a wait's arguments depend on the time
                outage.forget()
                raise
            send, send_timeout = again
            continue
        except AgentCallError as exc:
            outage.over()  # the agent answered
            exc.waited_before_s = spent
            raise
        except BaseException:
            outage.forget()
            raise
        outage.over()
        return result, spent
