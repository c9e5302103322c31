"""Block orders: counterbalanced ABBA BAAB (cancels linear drift) and the naive AAAA BBBB.

In ABBA the two A blocks sit at times 0 and 3 and the B blocks at 1 and 2: both arms have the same
mean time, so a drift linear in time adds the same to both and cancels in B/A. BAAB after ABBA
also balances which arm goes first (a carry-over from the previous block, the first block's cold
box). The naive order exists only to show what drift does without counterbalancing.
"""

from __future__ import annotations

from dsv4ops.ab.model import Arm

_QUADS: tuple[tuple[Arm, ...], tuple[Arm, ...]] = (("A", "B", "B", "A"), ("B", "A", "A", "B"))


def _check(blocks: int) -> None:
    if isinstance(blocks, bool) or not isinstance(blocks, int):
        raise ValueError(f"blocks must be an integer, not {blocks!r}")
    if blocks < 2 or blocks % 2:
        raise ValueError(f"blocks must be even and at least 2 (one A and one B), not {blocks}")


def counterbalanced(blocks: int) -> list[Arm]:
    """ABBA BAAB ABBA ... truncated to `blocks` (even, >= 2; a multiple of 4 cancels drift fully)."""
    _check(blocks)
    out: list[Arm] = []
    k = 0
    while len(out) < blocks:
        out.extend(_QUADS[k % 2])
        k += 1
    return out[:blocks]


def naive(blocks: int) -> list[Arm]:
    """AAAA BBBB: every A first (for the drift comparison only)."""
    _check(blocks)
    half = blocks // 2
    a: list[Arm] = ["A"] * half
    b: list[Arm] = ["B"] * half
    return a + b
