"""Decode side of the twin's PD transfer: registration per prefill, one pull per room, and
SGLang's heartbeat.

As in SGLang 0.5.23 (`disaggregation/common/conn.py`):
* the decode caches what it learnt from a prefill's bootstrap server (L1428) and never checks
  that the process behind the address is still the same one (no instance id: a prefill replaced
  behind the same address leaves stale metadata until a transfer times out, L2883-2904);
* a transfer that times out in WaitingForInput invalidates the cached connection, so the next
  request registers again (L2883);
* a heartbeat thread polls `GET /health` on every cached prefill each
  SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL (5 s, at least 2), and after
  SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE (2) misses in a row drops the cached info and
  fails the rooms in flight with that prefill (L1998-2097). The bootstrap server answers
  /health from process start, so a prefill restarted within two intervals is never noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp

from .config import TwinConfig
from .events import EventLog
from .hazards import HazardBoard
from .pd import HandshakeError, TransferError, _fraction

log = logging.getLogger("sglang.twin")
Addr = tuple[str, int]


class KVReceiver:
    def __init__(
        self,
        *,
        config: TwinConfig,
        hazards: HazardBoard,
        events: EventLog,
        instance_id: str,
        decode_addr: str,
    ) -> None:
        self.config = config
        self.hazards = hazards
        self.events = events
        self.instance_id = instance_id
        self.decode_addr = decode_addr
        self.prefills: dict[Addr, dict[str, object]] = {}  # prefill_info_table + connection pool
        self.heartbeat_failures: dict[Addr, int] = {}
        self.in_flight = 0
        self.failed = 0  # transfers (decode.py L2827, L3373)
        self.bootstrap_failed = 0  # handshakes (decode.py L1177)
        self._session: aiohttp.ClientSession | None = None
        self._locks: dict[Addr, asyncio.Lock] = {}
        self._pulls: dict[Addr, set[asyncio.Task[None]]] = {}  # addr_to_rooms_tracker
        self._lost: dict[asyncio.Task[None], str] = {}
        self._heartbeat: asyncio.Task[None] | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False)
            )
        return self._session

    def start_heartbeat(self) -> None:
        """The KV manager starts its heartbeat thread at init, after the model loaded."""
        if self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._heartbeat_loop())

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        if self._session is not None:
            await self._session.close()

    # --- heartbeat -----------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        interval = self.config.wall(self.config.heartbeat_interval_s)
        while True:
            await asyncio.sleep(interval)
            for addr in list(self.prefills):
                await self._beat(addr)

    async def _beat(self, addr: Addr) -> None:
        host, port = addr
        # requests' timeout=(2, 3): connect 2 s, read 3 s
        timeout = aiohttp.ClientTimeout(
            sock_connect=self.config.wall(2.0), sock_read=self.config.wall(3.0)
        )
        ok = False
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
            async with self._client().get(f"http://{host}:{port}/health", timeout=timeout) as resp:
                ok = resp.status == 200
        if ok:
            self.heartbeat_failures[addr] = 0
            return
        log.info("Attempting to reconnect to %s:%d...", host, port)
        misses = self.heartbeat_failures.get(addr, 0) + 1
        self.heartbeat_failures[addr] = misses
        if misses >= self.config.heartbeat_max_failure:
            self._node_failure(addr)

    def _node_failure(self, addr: Addr) -> None:
        """conn.py `_handle_node_failure`: forget the prefill, fail the rooms in flight with it."""
        self.prefills.pop(addr, None)
        self.heartbeat_failures.pop(addr, None)
        reason = f"Lost connection with prefill instance (bootstrap_addr: {addr[0]}:{addr[1]})"
        pulls = self._pulls.pop(addr, set())
        for task in pulls:
            if not task.done():
                self._lost[task] = reason
                task.cancel()
        log.error("%s, %d requests affected", reason, len(pulls))
        self.events.emit(
            "prefill_lost",
            bootstrap=f"{addr[0]}:{addr[1]}",
            affected=len(pulls),
            misses=self.config.heartbeat_max_failure,
        )

    # --- registration and transfer -------------------------------------------------------
    async def _register(self, host: str, port: int) -> dict[str, object]:
        key = (host, port)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key in self.prefills:
                return self.prefills[key]  # cached: never re-checked against the process
            base = f"http://{host}:{port}"
            timeout = aiohttp.ClientTimeout(total=self.config.wall(self.config.bootstrap_timeout_s))
            async with self._client().get(f"{base}/route", timeout=timeout) as resp:
                if resp.status != 200:
                    raise HandshakeError(f"bootstrap /route on {base} answered {resp.status}")
                route = await resp.json()
            body = {"decode_addr": self.decode_addr, "decode_instance_id": self.instance_id}
            async with self._client().post(
                f"{base}/register_peer", json=body, timeout=timeout
            ) as resp:
                reg: dict[str, object] = await resp.json()
            self.prefills[key] = reg
            self.heartbeat_failures.setdefault(key, 0)
            self.events.emit(
                "peer_registered",
                bootstrap=f"{host}:{port}",
                prefill_instance_id=reg.get("prefill_instance_id"),
                prefill_pid=reg.get("prefill_pid"),
                prefill_started_at=reg.get("prefill_started_at"),
                page_size=route.get("page_size"),
            )
            return reg

    async def fetch(self, host: str, port: int, room: int, prompt_hash: str) -> None:
        """Pull the KV of `room`; raises TransferError after the waiting timeout or on errors."""
        self.in_flight += 1
        try:
            await self._fetch(host, port, room, prompt_hash)
        except TransferError as exc:
            if isinstance(exc, HandshakeError):
                self.bootstrap_failed += 1
            else:
                self.failed += 1
            self.events.emit(
                "transfer_failed",
                room=room,
                side="decode",
                reason=str(exc),
                bootstrap=f"{host}:{port}",
            )
            raise
        finally:
            self.in_flight -= 1

    async def _fetch(self, host: str, port: int, room: int, prompt_hash: str) -> None:
        key = (host, port)
        try:
            await self._register(host, port)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self.prefills.pop(key, None)
            raise HandshakeError(f"bootstrap server {host}:{port} unreachable: {exc!r}") from None
        body = {
            "room": room,
            "decode_instance_id": self.instance_id,
            "prompt_hash": prompt_hash,
            "degrade_state": self.hazards.state("degrade"),
        }
        pull = asyncio.ensure_future(self._pull(key, body))
        self._pulls.setdefault(key, set()).add(pull)
        try:
            await pull
        except asyncio.CancelledError:
            reason = self._lost.pop(pull, None)
            if reason is None:
                raise  # the request itself was cancelled (client gone)
            raise TransferError(reason) from None
        finally:
            self._pulls.get(key, set()).discard(pull)
            self._lost.pop(pull, None)

    async def _pull(self, key: Addr, body: dict[str, object]) -> None:
        waiting = self.config.wall(self.config.waiting_timeout_s)
        try:
            async with asyncio.timeout(waiting):
                if self._held(int(str(body["room"]))):  # no notice ever comes (sglang#36033)
                    await asyncio.Event().wait()
                await self._post_transfer(key, body)
        except TimeoutError:
            self.prefills.pop(key, None)  # invalidate_cached_bootstrap_infos (conn.py:2904)
            raise TransferError(
                f"Request {body['room']} timed out after {self.config.waiting_timeout_s:.1f}s "
                f"in KVPoll.WaitingForInput"
            ) from None

    def _held(self, room: int) -> bool:
        """The lost_transfer hazard (forced only): this room's KV never arrives, by a seeded
        hash of the room, so the same rooms are lost on every run."""
        if not self.hazards.active("lost_transfer", False):
            return False
        return _fraction(self.config.seed + 1, room) < self.config.lost_transfer_fraction

    async def _post_transfer(self, key: Addr, body: dict[str, object]) -> None:
        host, port = key
        try:
            async with self._client().post(f"http://{host}:{port}/transfer", json=body) as resp:
                if resp.status != 200:
                    raise TransferError(f"transfer of room {body['room']} failed: {resp.status}")
        except (aiohttp.ClientConnectionError, OSError):
            # The KV moves over NIXL/ZMQ, not this connection: a gone prefill is noticed by the
            # heartbeat (or the waiting timeout), never by an error on the transfer itself.
            await asyncio.Event().wait()
