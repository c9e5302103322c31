"""What a use case runs against: one target, its supervisor, its journal and the clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.journal.store import Journal

if TYPE_CHECKING:
    from dsv4ops.profiles.model import Target
    from dsv4ops.remote.supervisor import Supervisor


@dataclass
class TargetSession:
    """Built by the CLI's composition root (`cli/_context.open_target`); closed by the CLI."""

    target: Target
    supervisor: Supervisor
    journal: Journal
    clock: Clock = field(default_factory=SystemClock)

    def close(self) -> None:
        self.supervisor.executor.close()
