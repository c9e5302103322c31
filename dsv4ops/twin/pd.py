"""The PD KV-transfer protocol between twin processes, over real HTTP.

Prefill side: `BootstrapServer`, an aiohttp app on --disaggregation-bootstrap-port (as SGLang's
CommonKVBootstrapServer) with GET /health, GET /route, POST /register_peer and POST /transfer.
Decode side: `KVReceiver`, which registers with a prefill on first use and pulls each request's
KV by bootstrap room; the decode cannot produce a token until that succeeds.

Bootstrap degradation: the prefill keeps every decode peer it has seen (NIXL's table is never
pruned). When a new decode instance registers at the address of an earlier one while this prefill
keeps running, a fraction of its transfers fail silently: the prefill never answers them, the
decode times out after the waiting timeout, the prefill's own request after the bootstrap timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from .config import TwinConfig
from .events import EventLog
from .hazards import HazardBoard

FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # SGLang's health/warmup requests (disaggregation/utils.py:53)


class TransferError(Exception):
    """The KV for a room could not be fetched; the request fails."""


class HandshakeError(TransferError):
    """The decode could not bootstrap with the prefill (SGLang counts a bootstrap failure)."""


@dataclass
class Room:
    room: int
    prompt_hash: str
    prompt_tokens: int
    kv_ready: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    failed: bool = False
    handshaken: bool = False  # the decode asked for this room (it left the bootstrap queue)


@dataclass
class Peer:
    decode_addr: str
    instance_id: str
    stale: bool  # registered where an earlier decode instance of this prefill used to be


def _fraction(seed: int, room: int) -> float:
    h = hashlib.sha256(f"{seed}:{room}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


class BootstrapServer:
    def __init__(self, *, config: TwinConfig, hazards: HazardBoard, events: EventLog,
                 instance_id: str, info: dict[str, object]) -> None:
        self.config = config
        self.hazards = hazards
        self.events = events
        self.instance_id = instance_id
        self.info = info
        self.ready = False
        self.started_at = time.time()
        self.peers: dict[str, Peer] = {}  # by decode instance id
        self.seen_addrs: dict[str, str] = {}  # decode addr -> latest instance id
        self.rooms: dict[int, Room] = {}
        self.transfer_failed = 0
        self.bootstrap_failed = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/route", self._route)
        app.router.add_put("/route", self._route)
        app.router.add_post("/register_peer", self._register)
        app.router.add_post("/transfer", self._transfer)
        return app

    # --- used by the prefill's request path ----------------------------------------------
    def open_room(self, room: int, prompt_hash: str, prompt_tokens: int) -> Room:
        r = self.rooms.get(room)
        if r is None:
            r = self.rooms[room] = Room(room, prompt_hash, prompt_tokens)
        else:
            r.prompt_hash, r.prompt_tokens = prompt_hash, prompt_tokens
        return r

    async def wait_transferred(self, r: Room) -> bool:
        """True once the decode pulled the KV; False after the bootstrap timeout."""
        try:
            await asyncio.wait_for(r.done.wait(), self.config.wall(self.config.bootstrap_timeout_s))
            return not r.failed
        except TimeoutError:
            # prefill.py: a room the decode never bootstrapped is a bootstrap failure (L1377);
            # one it did is an inflight transfer failure (L1312)
            if r.handshaken:
                self.transfer_failed += 1
            else:
                self.bootstrap_failed += 1
            self.events.emit("transfer_failed", room=r.room, side="prefill",
                             reason="KVPoll.Bootstrapping timed out" if not r.handshaken
                             else "KVPoll.Transferring timed out")
            return False
        finally:
            self.rooms.pop(r.room, None)

    # --- HTTP ----------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _route(self, request: web.Request) -> web.Response:
        if not self.ready:
            return web.json_response({"error": "prefill ranks not registered"}, status=503)
        return web.json_response({
            "prefill_instance_id": self.instance_id,
            "prefill_pid": self.info.get("pid"),
            "prefill_started_at": self.started_at,
            **self.info,
        })

    async def _register(self, request: web.Request) -> web.Response:
        body = await request.json()
        addr, inst = str(body.get("decode_addr")), str(body.get("decode_instance_id"))
        previous = self.seen_addrs.get(addr)
        stale = previous is not None and previous != inst
        if inst not in self.peers:
            self.peers[inst] = Peer(addr, inst, stale)
            self.seen_addrs[addr] = inst
            self.events.emit("peer_registered", decode_addr=addr, decode_instance_id=inst,
                             previous_instance_id=previous, stale=stale)
            if stale and self.hazards.active("degrade", True):
                self.events.emit("degraded", decode_addr=addr, decode_instance_id=inst,
                                 previous_instance_id=previous)
        return web.json_response({"prefill_instance_id": self.instance_id,
                                  "prefill_pid": self.info.get("pid"),
                                  "prefill_started_at": self.started_at})

    def _degraded_for(self, peer: Peer, decode_state: str) -> bool:
        state = self.hazards.state("degrade")
        if state == "auto" and decode_state in ("force", "off"):
            state = decode_state  # the decode's switch applies when the prefill's is auto
        return state == "force" or (state == "auto" and peer.stale)

    async def _transfer(self, request: web.Request) -> web.Response:
        body = await request.json()
        peer = self.peers.get(str(body.get("decode_instance_id")))
        if peer is None:
            return web.json_response({"error": "unknown decode peer; register first"}, status=409)
        room_id = int(body["room"])
        deadline = self.config.wall(self.config.bootstrap_timeout_s)
        try:
            r = await asyncio.wait_for(self._room_ready(room_id), deadline)
        except TimeoutError:
            return web.json_response({"error": f"room {room_id} never prefilled"}, status=504)
        if r.prompt_hash != body.get("prompt_hash"):
            return web.json_response({"error": "prompt mismatch for room"}, status=409)
        if (self._degraded_for(peer, str(body.get("degrade_state", "auto")))
                and _fraction(self.config.seed, room_id) < self.config.degrade_fail_fraction):
            # Silent failure: the stale NIXL peer state swallows the transfer. The prefill
            # counts it only when its own request times out (wait_transferred).
            r.failed = True
            self.events.emit("transfer_failed", room=room_id, side="prefill",
                             decode_instance_id=peer.instance_id, reason="stale peer state")
            await asyncio.sleep(deadline)
            return web.json_response({"error": "transfer lost"}, status=504)
        r.done.set()
        return web.json_response({"room": room_id, "prompt_tokens": r.prompt_tokens,
                                  "kv_bytes": r.prompt_tokens * 70272})

    async def _room_ready(self, room_id: int) -> Room:
        while True:
            r = self.rooms.get(room_id)
            if r is not None:
                r.handshaken = True
                await r.kv_ready.wait()
                return r
            await asyncio.sleep(0.002)


class KVReceiver:
    """Decode side of the transfer: registration per prefill, then one pull per room."""

    def __init__(self, *, config: TwinConfig, hazards: HazardBoard, events: EventLog,
                 instance_id: str, decode_addr: str) -> None:
        self.config = config
        self.hazards = hazards
        self.events = events
        self.instance_id = instance_id
        self.decode_addr = decode_addr
        self.prefills: dict[tuple[str, int], dict[str, object]] = {}
        self.in_flight = 0
        self.failed = 0  # transfers (decode.py L2827, L3373)
        self.bootstrap_failed = 0  # handshakes (decode.py L1177)
        self._session: aiohttp.ClientSession | None = None
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _register(self, host: str, port: int) -> dict[str, object]:
        key = (host, port)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key in self.prefills:
                return self.prefills[key]
            base = f"http://{host}:{port}"
            timeout = aiohttp.ClientTimeout(total=self.config.wall(self.config.bootstrap_timeout_s))
            async with self._client().get(f"{base}/route", timeout=timeout) as resp:
                if resp.status != 200:
                    raise HandshakeError(f"bootstrap /route on {base} answered {resp.status}")
                route = await resp.json()
            body = {"decode_addr": self.decode_addr, "decode_instance_id": self.instance_id}
            async with self._client().post(f"{base}/register_peer", json=body,
                                           timeout=timeout) as resp:
                reg = await resp.json()
            self.prefills[key] = reg
            self.events.emit("peer_registered", bootstrap=f"{host}:{port}",
                             prefill_instance_id=reg.get("prefill_instance_id"),
                             prefill_pid=reg.get("prefill_pid"),
                             prefill_started_at=reg.get("prefill_started_at"),
                             page_size=route.get("page_size"))
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
            self.events.emit("transfer_failed", room=room, side="decode", reason=str(exc),
                             bootstrap=f"{host}:{port}")
            raise
        finally:
            self.in_flight -= 1

    async def _fetch(self, host: str, port: int, room: int, prompt_hash: str) -> None:
        waiting = self.config.wall(self.config.waiting_timeout_s)
        body = {"room": room, "decode_instance_id": self.instance_id, "prompt_hash": prompt_hash,
                "degrade_state": self.hazards.state("degrade")}
        for attempt in range(2):
            try:
                try:
                    await self._register(host, port)
                except (TimeoutError, aiohttp.ClientError) as exc:
                    self.prefills.pop((host, port), None)
                    raise HandshakeError(
                        f"bootstrap server {host}:{port} unreachable: {exc!r}") from None
                async with self._client().post(
                    f"http://{host}:{port}/transfer", json=body,
                    timeout=aiohttp.ClientTimeout(total=waiting),
                ) as resp:
                    if resp.status == 409 and attempt == 0:
                        # The prefill does not know us (it was restarted): register again.
                        self.prefills.pop((host, port), None)
                        continue
                    if resp.status != 200:
                        raise TransferError(f"transfer of room {room} failed: {resp.status}")
                    return
            except TimeoutError:
                self.prefills.pop((host, port), None)  # SGLang invalidates cached bootstrap info
                raise TransferError(
                    f"KVPoll.WaitingForInput timed out after {self.config.waiting_timeout_s}s"
                ) from None
            except aiohttp.ClientError as exc:
                self.prefills.pop((host, port), None)
                raise TransferError(f"bootstrap server {host}:{port} unreachable: {exc}") from None
        raise TransferError(f"transfer of room {room} refused after re-registration")
