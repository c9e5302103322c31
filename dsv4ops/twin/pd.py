"""The PD KV-transfer protocol between twin processes, over real HTTP.

Prefill side: `BootstrapServer`, an aiohttp app on --disaggregation-bootstrap-port (as SGLang's
CommonKVBootstrapServer) with GET /health, GET /route, POST /register_peer and POST /transfer.
As in SGLang it is up from the start of the process (TokenizerManager init, before the model
loads): `/health` is always 200, `/route` is 503 until the prefill's ranks registered (after load
and graph capture, conn.py:3055-3067, 3208-3214). Decode side: `kv_receiver.KVReceiver`.

A transfer from a decode this prefill never registered (the decode cached the metadata of an
earlier prefill process behind the same address; 0.5.23 has no instance-id check) goes where no
rank listens on the box: nothing answers it, the decode fails after its waiting timeout and only
then re-registers. There is no "unknown peer, register again" answer.

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
    def __init__(
        self,
        *,
        config: TwinConfig,
        hazards: HazardBoard,
        events: EventLog,
        instance_id: str,
        info: dict[str, object],
    ) -> None:
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
            self.events.emit(
                "transfer_failed",
                room=r.room,
                side="prefill",
                reason="KVPoll.Bootstrapping timed out"
                if not r.handshaken
                else "KVPoll.Transferring timed out",
            )
            return False
        finally:
            self.rooms.pop(r.room, None)

    # --- HTTP ----------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _route(self, request: web.Request) -> web.Response:
        if not self.ready:
            return web.Response(
                text="Prefill server not fully registered yet " "(0 workers registered).",
                status=503,
            )
        return web.json_response(
            {
                "prefill_instance_id": self.instance_id,
                "prefill_pid": self.info.get("pid"),
                "prefill_started_at": self.started_at,
                **self.info,
            }
        )

    async def _register(self, request: web.Request) -> web.Response:
        body = await request.json()
        addr, inst = str(body.get("decode_addr")), str(body.get("decode_instance_id"))
        previous = self.seen_addrs.get(addr)
        stale = previous is not None and previous != inst
        if inst not in self.peers:
            self.peers[inst] = Peer(addr, inst, stale)
            self.seen_addrs[addr] = inst
            self.events.emit(
                "peer_registered",
                decode_addr=addr,
                decode_instance_id=inst,
                previous_instance_id=previous,
                stale=stale,
            )
            if stale and self.hazards.active("degrade", True):
                self.events.emit(
                    "degraded",
                    decode_addr=addr,
                    decode_instance_id=inst,
                    previous_instance_id=previous,
                )
        return web.json_response(
            {
                "prefill_instance_id": self.instance_id,
                "prefill_pid": self.info.get("pid"),
                "prefill_started_at": self.started_at,
            }
        )

    def _degraded_for(self, peer: Peer, decode_state: str) -> bool:
        state = self.hazards.state("degrade")
        if state == "auto" and decode_state in ("force", "off"):
            state = decode_state  # the decode's switch applies when the prefill's is auto
        return state == "force" or (state == "auto" and peer.stale)

    async def _transfer(self, request: web.Request) -> web.Response:
        body = await request.json()
        room_id = int(body["room"])
        deadline = self.config.wall(self.config.bootstrap_timeout_s)
        peer = self.peers.get(str(body.get("decode_instance_id")))
        if peer is None:
            # Stale metadata on the decode: the message reaches no rank of this process.
            self.events.emit(
                "transfer_unanswered",
                room=room_id,
                decode_instance_id=body.get("decode_instance_id"),
                reason="decode not registered with this prefill instance",
            )
            await asyncio.sleep(deadline)
            return web.json_response({"error": "no rank answered"}, status=504)
        try:
            r = await asyncio.wait_for(self._room_ready(room_id), deadline)
        except TimeoutError:
            return web.json_response({"error": f"room {room_id} never prefilled"}, status=504)
        if r.prompt_hash != body.get("prompt_hash"):
            return web.json_response({"error": "prompt mismatch for room"}, status=409)
        if (
            self._degraded_for(peer, str(body.get("degrade_state", "auto")))
            and _fraction(self.config.seed, room_id) < self.config.degrade_fail_fraction
        ):
            # Silent failure: the stale NIXL peer state swallows the transfer. The prefill
            # counts it only when its own request times out (wait_transferred).
            r.failed = True
            self.events.emit(
                "transfer_failed",
                room=room_id,
                side="prefill",
                decode_instance_id=peer.instance_id,
                reason="stale peer state",
            )
            await asyncio.sleep(deadline)
            return web.json_response({"error": "transfer lost"}, status=504)
        r.done.set()
        return web.json_response(
            {"room": room_id, "prompt_tokens": r.prompt_tokens, "kv_bytes": r.prompt_tokens * 70272}
        )

    async def _room_ready(self, room_id: int) -> Room:
        while True:
            r = self.rooms.get(room_id)
            if r is not None:
                r.handshaken = True
                await r.kv_ready.wait()
                return r
            await asyncio.sleep(0.002)
