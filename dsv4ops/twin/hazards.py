"""Hazard switches: each hazard is auto (on exactly when its condition holds), force or off.

Start-up: DSV4_TWIN_FORCE=degrade,wedge,corrupt,slow_health,lost_transfer,stream_tools forces a
subset, DSV4_TWIN_HAZARDS=off turns all off. Run time: POST /_twin/hazard {"hazard": NAME,
"state": "force"|"off"|"auto"}, for `corrupt` optionally with "shapes": [...]
(twin/corruption.py; start-up: DSV4_TWIN_CORRUPT_SHAPES), the same for `stream_tools`
(DSV4_TWIN_STREAM_TOOLS_SHAPES).
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import HAZARD_NAMES, TwinConfig
from .corruption import check_shapes, check_stream_shapes

STATES = ("auto", "force", "off")


class HazardBoard:
    def __init__(self, config: TwinConfig) -> None:
        self.corrupt_shapes: tuple[str, ...] = tuple(config.corrupt_shapes)
        self._health_delay_s = config.health_delay_s
        self.stream_shapes: tuple[str, ...] = tuple(config.stream_tools_shapes)
        self._state = {}
        for name in HAZARD_NAMES:
            if name in config.force:
                self._state[name] = "force"
            elif config.hazards_off:
                self._state[name] = "off"
            else:
                self._state[name] = "auto"

    def state(self, name: str) -> str:
        return self._state[name]

    def set(self, name: str, state: str) -> None:
        """Raises ValueError on an unknown hazard or state."""
        if name not in self._state:
            raise ValueError(f"unknown hazard {name!r}; choose from {', '.join(HAZARD_NAMES)}")
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}; choose from {', '.join(STATES)}")
        self._state[name] = state

    def set_shapes(self, name: str, shapes: Sequence[str]) -> None:
        """The shapes of `corrupt` or `stream_tools`. Raises ValueError on another hazard, an
        unknown shape or an empty list."""
        if isinstance(shapes, str) or not isinstance(shapes, Sequence):
            raise ValueError(f"shapes must be a list of names, got {shapes!r}")
        if name == "corrupt":
            self.corrupt_shapes = check_shapes([str(s) for s in shapes])
        elif name == "stream_tools":
            self.stream_shapes = check_stream_shapes([str(s) for s in shapes])
        else:
            raise ValueError(f"hazard {name!r} has no shapes (corrupt and stream_tools have)")

    def set_corrupt_shapes(self, shapes: Sequence[str]) -> None:
        """Raises ValueError on an unknown shape or an empty list."""
        self.set_shapes("corrupt", shapes)

    def active(self, name: str, condition: bool) -> bool:
        """Whether the hazard applies now, given whether its real-world condition holds."""
        state = self._state[name]
        return state == "force" or (state == "auto" and condition)

    def health_delay_s(self) -> float:
        """Model seconds /health waits first: the slow_health hazard's, else none. It is never
        on by itself: the twin models no long chunked prefill (sglang#22511) of its own."""
        return self._health_delay_s if self.active("slow_health", False) else 0.0

    def as_dict(self) -> dict[str, str]:
        return dict(self._state)
