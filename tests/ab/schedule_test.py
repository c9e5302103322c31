"""Block orders: ABBA BAAB balances the arms' mean time (linear drift cancels); naive does not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsv4ops.ab.schedule import counterbalanced, naive


def test_counterbalanced_is_abba_baab() -> None:
    assert "".join(counterbalanced(8)) == "ABBABAAB"
    assert "".join(counterbalanced(12)) == "ABBABAABABBA"
    assert "".join(counterbalanced(2)) == "AB"


def test_naive_is_all_a_then_all_b() -> None:
    assert "".join(naive(8)) == "AAAABBBB"


@pytest.mark.parametrize("bad", [0, 1, 3, 7, -4, 2.0, True])
def test_odd_or_tiny_block_counts_are_refused(bad: object) -> None:
    for order in (counterbalanced, naive):
        with pytest.raises(ValueError, match="blocks must be"):
            order(bad)  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=40))
def test_every_quad_has_equal_mean_time_for_both_arms(quads: int) -> None:
    s = counterbalanced(4 * quads)
    assert s.count("A") == s.count("B") == 2 * quads
    for q in range(quads):
        arms = s[4 * q : 4 * q + 4]
        a_time = sum(i for i, x in enumerate(arms) if x == "A")
        b_time = sum(i for i, x in enumerate(arms) if x == "B")
        assert a_time == b_time  # 0+3 == 1+2: a linear drift adds the same to both arms
    # every adjacent pair (2k, 2k+1) holds one A and one B: the pairing the analysis relies on
    assert all({s[i], s[i + 1]} == {"A", "B"} for i in range(0, len(s), 2))
    # the first arm alternates between quads (no arm always warm-starts the cycle)
    assert [s[4 * q] for q in range(quads)] == ["A" if q % 2 == 0 else "B" for q in range(quads)]


def test_naive_leaves_the_arms_mean_time_apart() -> None:
    s = naive(8)
    a = [i for i, x in enumerate(s) if x == "A"]
    b = [i for i, x in enumerate(s) if x == "B"]
    assert sum(b) / len(b) - sum(a) / len(a) == 4  # B is measured 4 blocks later on average
