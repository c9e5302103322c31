"""The canary's nonces: 8 hex digits of four distinct bytes, none like a number's digits, never
repeated within a run."""

import re

import pytest

from dsv4ops.canary import workload
from dsv4ops.canary.workload import NonceBook, new_nonce


def test_a_nonce_is_eight_hex_digits_of_four_distinct_bytes_none_like_a_number() -> None:
    for _ in range(2000):
        n = new_nonce()
        assert re.fullmatch(r"[0-9a-f]{8}", n)
        pieces = [n[i : i + 2] for i in range(0, 8, 2)]
        assert len(set(pieces)) == 4, n
        assert not any(p.isdigit() or re.fullmatch(r"f[0-9]", p) for p in pieces), n


def test_the_book_draws_again_on_a_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["0a1b2c3d", "0a1b2c3d", "4e5f6071"])
    monkeypatch.setattr(workload, "new_nonce", lambda: next(drawn))
    book = NonceBook()
    assert book.issue("r1") == "0a1b2c3d"
    assert book.issue("r2") == "4e5f6071"
    assert book.owners == {"0a1b2c3d": "r1", "4e5f6071": "r2"}
