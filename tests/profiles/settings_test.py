"""The declared settings (dsv4ops/settings.py): everything derived from CanaryThresholds agrees
with it: the schema the loader validates by, the loaded profile, the canary's Thresholds, the
journal record's reading (docs/profiles.md's tables: tests/profiles/reference_test.py)."""

from __future__ import annotations

from typing import cast

import pytest
from pydantic import Field as Key

from dsv4ops.canary.verdict import Thresholds
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import load_profile
from dsv4ops.profiles.json_schema import model_schema
from dsv4ops.profiles.model import CanaryThresholds, ProbeSettings
from dsv4ops.profiles.profile_spec import ProfileSpec
from dsv4ops.profiles.reference import model_table
from dsv4ops.profiles.schema import describe, json_kind, value_schema
from dsv4ops.settings import Settings, UnfitValue
from testing.profiles import child

SETTINGS = CanaryThresholds.model_fields


def _bounds(name: str) -> tuple[str, float | None, float | None]:
    """A setting's kind and the bounds of its number (or of each item), as the errors read them."""
    value, _ = value_schema(SETTINGS[name])
    numbers = value.get("items", value)
    return json_kind(value), numbers.get("minimum"), numbers.get("maximum")


def test_the_profile_keys_are_the_declared_models_themselves() -> None:
    fields = ProfileSpec.model_fields
    assert (fields["canary"].annotation, fields["probe"].annotation) == (
        CanaryThresholds,
        ProbeSettings,
    )


def test_every_declared_setting_is_in_the_schema_with_its_default_and_bounds() -> None:
    schema = cast(JSONObject, model_schema(CanaryThresholds, null_is_default=False))["properties"]
    assert list(schema) == list(SETTINGS)
    for name, info in SETTINGS.items():
        default = list(info.default) if isinstance(info.default, tuple) else info.default
        prop = schema[name]
        kind, minimum, maximum = _bounds(name)
        numbers = prop["items"] if kind == "int_list" else prop
        assert (prop["default"], numbers.get("minimum"), numbers.get("maximum")) == (
            default,
            minimum,
            maximum,
        ), name
    assert schema["sweep_concurrency"]["maxItems"] == 64


def test_the_model_and_the_thresholds_hold_every_setting_at_its_declared_default() -> None:
    defaults = {name: info.default for name, info in SETTINGS.items()}
    assert CanaryThresholds().model_dump() == defaults
    th = Thresholds()
    assert isinstance(th, CanaryThresholds)
    assert {name: th.to_json()[name] for name in defaults} == defaults


def test_a_profile_that_sets_nothing_loads_the_declared_defaults(write) -> None:  # type: ignore[no-untyped-def]
    write("p", child(""))
    assert load_profile("p").canary == CanaryThresholds()


@pytest.mark.parametrize(
    "name", [n for n in SETTINGS if _bounds(n)[2] is not None], ids=lambda n: n
)
def test_the_loader_refuses_a_value_above_each_declared_maximum(write, name) -> None:  # type: ignore[no-untyped-def]
    kind, _, maximum = _bounds(name)
    assert maximum is not None
    too_big = int(maximum) + 1
    value = f"[{too_big}]" if kind == "int_list" else str(too_big)
    write("p", child(f"canary:\n  {name}: {value}\n"))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    assert info.value.key == f"canary.{name}" + ("[0]" if kind == "int_list" else "")


def test_a_profile_value_reaches_the_thresholds_by_one_typed_path(write) -> None:  # type: ignore[no-untyped-def]
    write("p", child("canary:\n  stall_s: 3\n  sweep_concurrency: [8, 12, 16]\n"))
    canary = load_profile("p").canary
    assert isinstance(canary, CanaryThresholds) and canary.sweep_concurrency == (8, 12, 16)
    th = Thresholds.judging(canary)
    assert (th.stall_s, th.sweep_concurrency) == (3.0, (8, 12, 16)) and isinstance(
        th.stall_s, float
    )
    assert th.tool_call_silence_s == Thresholds().tool_call_silence_s  # canary-side default
    with pytest.raises(ValueError, match="frozen"):
        th.stall_s = 1.0  # type: ignore[misc]


def test_a_record_is_read_through_the_declaration_and_what_it_lacks_is_at_the_default() -> None:
    got = CanaryThresholds.from_record(
        {"smoke_requests": "***", "stall_s": 1, "sweep_concurrency": [4, 8, 12], "gone": 3},
        redacted="***",
    )
    assert got == CanaryThresholds(stall_s=1.0, sweep_concurrency=(4, 8, 12))
    assert isinstance(got.stall_s, float)
    assert CanaryThresholds.from_record(None) == CanaryThresholds()
    assert CanaryThresholds.from_record({}) == CanaryThresholds()


@pytest.mark.parametrize(
    ("record", "name", "expected"),
    [
        ({"thinking": 1}, "thinking", "true or false"),
        ({"stall_s": "fast"}, "stall_s", "a number"),
        ({"stall_s": True}, "stall_s", "a number"),
        ({"stall_s": float("nan")}, "stall_s", "a number"),
        ({"freeze_s": None}, "freeze_s", "a number"),
        ({"smoke_requests": 2.5}, "smoke_requests", "an integer"),
        ({"sweep_concurrency": [4, "8"]}, "sweep_concurrency", "a list of integers"),
        ({"smoke_requests": "***"}, "smoke_requests", "an integer"),  # no `redacted` given
        ("smoke", "", "a mapping of settings"),
        ({"sweep_concurrency": [5000, "8"]}, "sweep_concurrency", "a list of integers"),
    ],
)
def test_a_recorded_value_that_does_not_fit_is_never_the_default(
    record: object, name: str, expected: str
) -> None:
    with pytest.raises(UnfitValue) as info:
        CanaryThresholds.from_record(record)
    assert (info.value.name, info.value.expected) == (name, expected)


def test_a_recorded_value_of_its_type_outside_todays_bounds_is_read_as_recorded() -> None:
    # The bounds may have changed since; that deployment ran with the value (docs/deploy.md).
    got = CanaryThresholds.from_record(
        {"stall_s": 0, "smoke_requests": 20_000, "sweep_concurrency": [8, 5000], "thinking": True}
    )
    assert (got.stall_s, got.smoke_requests, got.sweep_concurrency) == (0.0, 20_000, (8, 5000))
    assert isinstance(got.stall_s, float) and got.thinking is True
    assert CanaryThresholds.from_record({"sweep_concurrency": [8] * 65}).sweep_concurrency == (
        (8,) * 65
    )


def test_a_recorded_choice_outside_its_choices_does_not_fit() -> None:
    assert ProbeSettings.from_record({"tool_call": "auto"}).tool_call == "auto"
    with pytest.raises(UnfitValue) as info:
        ProbeSettings.from_record({"tool_call": "forced"})
    assert (info.value.name, info.value.value) == ("tool_call", "forced")
    assert info.value.expected == "one of required, auto, off"
    with pytest.raises(UnfitValue) as info:
        ProbeSettings.from_record({"tool_call": 1})  # not a string: still named by its choices
    assert info.value.expected == "one of required, auto, off"


def _table(cls: type[Settings], prefix: str) -> list[str]:
    return model_table(model_schema(cls, null_is_default=False), prefix)


def test_a_choice_setting_is_validated_by_its_choices() -> None:
    tool_call = ProbeSettings.model_fields["tool_call"]
    assert (tool_call.default, describe(tool_call)) == ("required", "one of required, auto, off")
    assert "`required` / `auto` / `off`" in _table(ProbeSettings, "probe.")[2]


class _Probe(Settings):
    # A section as another one is declared (e.g. a `probe.tool_call` setting).
    tool_call: bool = Key(True, description="the probe sends a tool call")
    timeout_s: float = Key(10.0, ge=0.1, le=600.0, description="seconds the probe waits")


def test_a_new_section_is_one_model_away() -> None:
    fields = _Probe.model_fields
    assert {k: (f.default, describe(f)) for k, f in fields.items()} == {
        "tool_call": (True, "true or false"),
        "timeout_s": (10.0, "a number from 0.1 to 600"),
    }
    assert _table(_Probe, "probe.")[2] == (
        "| `probe.tool_call` | bool | `true` | - | the probe sends a tool call |"
    )
    assert _Probe.from_record({"timeout_s": 2}) == _Probe(timeout_s=2.0)
