"""The one model of a deployment: a frozen `Deployment` of three `Component`s.

`profiles.render` builds it from a profile and a target; the journal stores it (`to_record`) and
rebuilds it (`from_record`), so a rollback redeploys exactly what was recorded; orchestrate
deploys it; the canary reads its endpoint, model name and thresholds section from it. Every
port is computed once, at render time, from the profile; nothing is parsed back from argv
except when reading a journal written before those fields were recorded.

It carries its profile as a `RecordedProfile` (dsv4ops/recorded.py: the resolved profile and
its flags, stored by the journal as rendered or recorded, byte for byte) and reads it only
through declarations, once each: `canary` and `probe` (dsv4ops/settings.py), the `model` and
`router` it needs (`model_name`, `router_kind`) and the flags (`flags`, `decode_buckets`): the
only readers of those parts of a record. A recorded value that fits no declaration raises
RecordedSettingError naming the operation, the key and the value (docs/deploy.md, "Recorded
settings"); it is never replaced by a default. So does a recorded component's field
(`Component.from_record`) or the profile's name, path, commit, hash or kernel package.

Its components are `component.py`'s (re-exported here). Imports only `errors`, `component`,
`routerkind`, `settings`, `recorded`, `constants` and `apikey` (whose reading it never calls).
Pure data; no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from dsv4ops.apikey import ApiKeyRef
from dsv4ops.component import ANY_ADDRESS, START_ORDER, Component, argv_value, commands_hash
from dsv4ops.constants import (
    PD_BOOTSTRAP_TIMEOUT_ENV,
    PD_WAITING_TIMEOUT_ENV,
    SGLANG_DEFAULT_DECODE_LOG_INTERVAL,
    SGLANG_PD_TIMEOUT_DEFAULT_S,
)
from dsv4ops.errors import DeployError, RecordedSettingError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.recorded import (
    RecordedFlags,
    RecordedModel,
    RecordedProfile,
    RecordedRouter,
    Section,
    mend_component,
)
from dsv4ops.routerkind import RouterKind
from dsv4ops.settings import CanaryThresholds, ProbeSettings

STOP_ORDER: tuple[str, ...] = ("router", "decode", "prefill")
WORKERS: tuple[str, ...] = ("prefill", "decode")
DEFAULT_MODEL = "default"


def served_model_name(served_name: str | None, path: str | None) -> str:
    """The model name requests carry: SGLang serves `--served-model-name`, else the model path."""
    return served_name or path or DEFAULT_MODEL


@dataclass(frozen=True)
class ProfileWarning:
    """A known hazard or a soft rule: not an error, but canaries and operators act on it."""

    code: str
    message: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass(frozen=True)
class Deployment:
    """A rendered profile for one target, plus where it came from (for the journal).

    `commands_hash` is computed from the components unless given: a deployment rebuilt from the
    journal keeps the recorded hash, which covers the real (unredacted) values.
    """

    profile_name: str
    components: tuple[Component, ...]
    profile_path: str | None = None
    git_commit: str | None = None
    commands_hash: str = ""
    # the resolved profile and its flags, read only through the typed sections below
    recorded: RecordedProfile = RecordedProfile()
    kernel_package: str | None = None
    source_op: str | None = None  # journal op this was rebuilt from (rollback)
    target: str | None = None  # the target it was rendered for
    warnings: tuple[ProfileWarning, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", tuple(self.components))
        names = [c.name for c in self.components]
        if sorted(names) != sorted(START_ORDER):
            raise DeployError(
                f"profile {self.profile_name} renders components {names}; "
                f"a PD deployment needs exactly {', '.join(START_ORDER)}"
            )
        if not self.commands_hash:
            object.__setattr__(self, "commands_hash", commands_hash(self.components))

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def in_order(self, order: Sequence[str] = START_ORDER) -> list[Component]:
        return [self.component(n) for n in order]

    @cached_property
    def model_name(self) -> str:
        """The model name requests to this deployment carry (from its recorded `model`)."""
        model = self._section("model", RecordedModel)
        return served_model_name(model.served_name, model.path)

    @cached_property
    def canary(self) -> CanaryThresholds:
        """The profile's `canary` section as recorded, read once through its declaration
        (`Thresholds.judging` extends it; RecordedSettingError for a value that does not fit)."""
        return self._section("canary", CanaryThresholds)

    @cached_property
    def probe(self) -> ProbeSettings:
        """The profile's `probe` section as recorded (recorded before it existed: the default,
        a forced call, as it was probed). RecordedSettingError for a value that does not fit."""
        return self._section("probe", ProbeSettings)

    @cached_property
    def flags(self) -> RecordedFlags:
        """The profile's flags as recorded (the canary gate compares them with the deployed
        ones'). RecordedSettingError for a value that does not fit."""
        return self._section("flags", RecordedFlags)

    @cached_property
    def switches(self) -> dict[str, bool | None]:
        """The profile's on/off flags as recorded (the canary gate compares them with the
        deployed ones'; one recorded before it existed is absent). RecordedSettingError for a
        value that does not fit."""
        return self.recorded.switches(op=self.source_op, profile=self._profile_ref)

    def check_recorded(self) -> None:
        """Read every recorded section now (RecordedSettingError before anything changes)."""
        _ = self.canary, self.probe, self.model_name, self.router_kind, self.flags

    @property
    def _profile_ref(self) -> str:
        """The profile a way back names: its path, else its name."""
        return self.profile_path or self.profile_name

    def _section(self, name: str, cls: type[Section]) -> Section:
        return self.recorded.read(name, cls, op=self.source_op, profile=self._profile_ref)

    @property
    def decode_log_interval(self) -> int:
        """The decode's `--decode-log-interval` (SGLang's 40 when not given): decode iterations
        between two metric reports, which the canary's freeze detection must wait out. A value
        that is no positive integer (SGLang would not start with it: a hand-edited record)
        raises RecordedSettingError, never judged by the default."""
        value = argv_value(self.component("decode").argv, "--decode-log-interval")
        if value is None:
            return SGLANG_DEFAULT_DECODE_LOG_INTERVAL
        if not value.isdigit() or int(value) < 1:
            key = "argv --decode-log-interval"
            raise self._unfit("decode", key, value, "a positive integer")
        return int(value)

    def _unfit(self, name: str, key: str, value: str, expected: str) -> RecordedSettingError:
        return RecordedSettingError(
            self.source_op,
            f"components.{name}.{key}",
            value,
            expected,
            hint=mend_component(self.source_op, name, key.split(" ")[0]),
        )

    @cached_property
    def router_kind(self) -> RouterKind:
        """Which router fronts this deployment (its recorded router.kind): the one answer every
        command that talks to the router asks. Recorded before the choice: sglang-router."""
        return self._section("router", RecordedRouter).kind

    @property
    def router_key(self) -> ApiKeyRef | None:
        """Where the router's API key lives on this machine (None: the router needs none)."""
        return self.component("router").api_key

    def pd_timeouts(self) -> dict[str, int | str]:
        """The PD timeouts the servers run with: the decode's KV waiting timeout and the
        prefill's bootstrap timeout, as their env sets them, else SGLang's default. A value
        that is no number of seconds raises RecordedSettingError (a hand-edited record)."""
        out: dict[str, int | str] = {}
        for key, side, env in (
            ("decode_waiting_s", "decode", PD_WAITING_TIMEOUT_ENV),
            ("prefill_bootstrap_s", "prefill", PD_BOOTSTRAP_TIMEOUT_ENV),
        ):
            value = self.component(side).env.get(env)
            if value is not None and not value.isdigit():
                raise self._unfit(side, f"env {env}", value, "a whole number of seconds")
            out[key] = int(value) if value is not None else SGLANG_PD_TIMEOUT_DEFAULT_S
            out[f"{key}_source"] = "profile" if value is not None else "SGLang default"
        return out

    @property
    def decode_buckets(self) -> tuple[int, ...]:
        """The decode's CUDA-graph batch sizes as recorded (empty when unknown)."""
        return self.flags.decode_buckets

    def describe(self) -> str:
        commit = (self.git_commit or "uncommitted")[:12]
        return f"{self.profile_name} @ {commit}"

    def to_json(self) -> JSONObject:
        """The `profile render --json` view (without the hash, which the printer adds)."""
        return {
            "profile": self.profile_name,
            "target": self.target,
            "components": [c.to_json() for c in self.components],
        }

    def profile_record(self) -> JSONObject:
        content, flags = self.recorded.record()
        return {
            "name": self.profile_name,
            "path": self.profile_path,
            "git_commit": self.git_commit,
            "commands_hash": self.commands_hash,
            "kernel_package": self.kernel_package,
            "flags": flags,
            "content": content,
        }

    def component_records(self) -> list[JSONObject]:
        return [c.to_record() for c in self.in_order()]

    def to_record(self) -> JSONObject:
        """What the journal's begin record stores: {"profile": {...}, "components": [...]}."""
        return {"profile": self.profile_record(), "components": self.component_records()}

    @classmethod
    def from_record(
        cls,
        profile: object,
        components: Sequence[object],
        *,
        source_op: str | None = None,
        unread: Collection[str] = (),
    ) -> Deployment:
        """Rebuild the exact Deployment a journal operation recorded (any journal version).
        A field that does not fit raises RecordedSettingError naming `profile.<key>`.
        `unread`: fields of its components a read-only reader does not need (status, watch;
        Component.from_record)."""
        if profile is not None and not isinstance(profile, Mapping):
            raise RecordedSettingError(
                source_op, "profile", profile, "a mapping", hint=_mend("profile", source_op)
            )
        p: Mapping[str, object] = profile or {}
        if not components:
            raise DeployError(
                f"journal entry {source_op or '?'} recorded no components; cannot redeploy it"
            )

        def text(key: str) -> str | None:
            value = p.get(key)
            if value is None or isinstance(value, str):
                return value
            raise RecordedSettingError(
                source_op, f"profile.{key}", value, "a string", hint=_mend(key, source_op)
            )

        content, flags = p.get("content"), p.get("flags")
        for key, value in (("content", content), ("flags", flags)):
            if value is not None and not isinstance(value, Mapping):
                raise RecordedSettingError(
                    source_op, f"profile.{key}", value, "a mapping", hint=_mend(key, source_op)
                )
        return cls(
            profile_name=text("name") or "unnamed",
            components=tuple(
                Component.from_record(c, op=source_op, unread=unread) for c in components
            ),
            profile_path=text("path"),
            git_commit=text("git_commit"),
            commands_hash=text("commands_hash") or "",
            recorded=RecordedProfile(content, flags),  # type: ignore[arg-type]
            kernel_package=text("kernel_package"),
            source_op=source_op,
        )


def _mend(key: str, op: str | None) -> str:
    return (
        f"mend `profile.{key}` of the begin record of {op} where it was edited; or redeploy "
        "the profile, which records it afresh: `dsv4ops deploy PROFILE --target TARGET`"
    )


__all__ = [
    "ANY_ADDRESS",
    "DEFAULT_MODEL",
    "START_ORDER",
    "STOP_ORDER",
    "WORKERS",
    "Component",
    "Deployment",
    "ProfileWarning",
    "argv_value",
    "commands_hash",
    "served_model_name",
]
