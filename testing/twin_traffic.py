"""Light background traffic through the router: a few client threads streaming short chats
until stopped (bounded in count), for tests and benchmarks that watch a twin under load."""

from __future__ import annotations

import threading
import time

import httpx


class RouterTraffic:
    def __init__(self, url: str, threads: int = 4, max_requests: int = 4000,
                 max_tokens: int = 48) -> None:
        self.url, self.left, self.stop = url, max_requests, threading.Event()
        self.max_tokens = max_tokens
        self.completed = 0
        self.errors = 0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        body = {"model": "default", "messages": [{"role": "user", "content": "hello"}],
                "max_tokens": self.max_tokens, "stream": True}
        with httpx.Client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
            while not self.stop.is_set() and self.left > 0:
                self.left -= 1
                try:
                    with client.stream("POST", self.url + "/v1/chat/completions", json=body) as r:
                        for _ in r.iter_lines():
                            if self.stop.is_set():
                                break
                    self.completed += 1
                except httpx.HTTPError:
                    self.errors += 1
                    time.sleep(0.05)

    def __enter__(self) -> RouterTraffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
