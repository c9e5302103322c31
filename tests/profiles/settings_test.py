"""The declared settings (dsv4ops/settings.py): everything derived from CanaryThresholds agrees
with it: the schema the loader validates by, the loaded profile, the canary's Thresholds, the
journal record's reading (docs/profiles.md's tables: tests/profiles/reference_test.py)."""

from __future__ import annotations

import dataclasses
from typing import cast

import pytest

from dsv4ops.canary.verdict import Thresholds
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import load_profile
from dsv4ops.profiles.json_schema import model_schema
from dsv4ops.profiles.model import CanaryThresholds, ProbeSettings
from dsv4ops.profiles.profile_spec import CanarySection, section_model
from dsv4ops.profiles.reference import model_table
from dsv4ops.profiles.schema import MAX_ITEMS, Field, field_view
from dsv4ops.settings import UnfitValue, declared, from_record, setting
from testing.profiles import child

SETTINGS = list(declared(CanaryThresholds))


def test_every_declared_setting_is_in_the_model_with_its_default_and_bounds() -> None:
    fields = CanarySection.model_fields
    schema = cast(JSONObject, model_schema(CanarySection, null_is_default=False))["properties"]
    assert list(fields) == list(schema) == [d.name for d in SETTINGS]
    for d in SETTINGS:
        assert field_view(fields[d.name]).kind == d.kind, d.name
        default = list(d.default) if isinstance(d.default, tuple) else d.default
        prop = schema[d.name]
        numbers = prop["items"] if d.kind == "int_list" else prop
        assert (prop["default"], numbers.get("minimum"), numbers.get("maximum")) == (
            default,
            d.bounds.minimum,
            d.bounds.maximum,
        ), d.name
        if d.kind == "int_list":
            assert prop["maxItems"] == (d.bounds.max_items or MAX_ITEMS), d.name


def test_the_model_and_the_thresholds_hold_every_setting_at_its_declared_default() -> None:
    defaults = {d.name: d.default for d in SETTINGS}
    assert dataclasses.asdict(CanaryThresholds()) == defaults
    th = Thresholds()
    assert isinstance(th, CanaryThresholds)
    assert {name: th.to_json()[name] for name in defaults} == defaults


def test_a_profile_that_sets_nothing_loads_the_declared_defaults(write) -> None:  # type: ignore[no-untyped-def]
    write("p", child(""))
    assert load_profile("p").canary == CanaryThresholds()


@pytest.mark.parametrize(
    "d", [d for d in SETTINGS if d.bounds.maximum is not None], ids=lambda d: d.name
)
def test_the_loader_refuses_a_value_above_each_declared_maximum(write, d) -> None:  # type: ignore[no-untyped-def]
    assert d.bounds.maximum is not None
    too_big = int(d.bounds.maximum) + 1
    value = f"[{too_big}]" if d.kind == "int_list" else str(too_big)
    write("p", child(f"canary:\n  {d.name}: {value}\n"))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    assert info.value.key == f"canary.{d.name}" + ("[0]" if d.kind == "int_list" else "")


def test_a_profile_value_reaches_the_thresholds_by_one_typed_path(write) -> None:  # type: ignore[no-untyped-def]
    write("p", child("canary:\n  stall_s: 3\n  sweep_concurrency: [8, 12, 16]\n"))
    th = Thresholds.judging(load_profile("p").canary)
    assert (th.stall_s, th.sweep_concurrency) == (3.0, (8, 12, 16)) and isinstance(
        th.stall_s, float
    )
    assert th.tool_call_silence_s == Thresholds().tool_call_silence_s  # canary-side default


def test_a_record_is_read_through_the_declaration_and_what_it_lacks_is_at_the_default() -> None:
    got = from_record(
        CanaryThresholds,
        {"smoke_requests": "***", "stall_s": 1, "sweep_concurrency": [4, 8, 12], "gone": 3},
        redacted="***",
    )
    assert got == dataclasses.replace(CanaryThresholds(), stall_s=1.0, sweep_concurrency=(4, 8, 12))
    assert isinstance(got.stall_s, float)
    assert from_record(CanaryThresholds, None) == CanaryThresholds()
    assert from_record(CanaryThresholds, {}) == CanaryThresholds()


@pytest.mark.parametrize(
    ("record", "name", "expected"),
    [
        ({"thinking": 1}, "thinking", "true or false"),
        ({"stall_s": "fast"}, "stall_s", "a number"),
        ({"stall_s": True}, "stall_s", "a number"),
        ({"freeze_s": None}, "freeze_s", "a number"),
        ({"smoke_requests": 2.5}, "smoke_requests", "an integer"),
        ({"sweep_concurrency": [4, "8"]}, "sweep_concurrency", "a list of integers"),
        ({"smoke_requests": "***"}, "smoke_requests", "an integer"),  # no `redacted` given
        ("smoke", "", "a mapping of settings"),
    ],
)
def test_a_recorded_value_that_does_not_fit_is_never_the_default(
    record: object, name: str, expected: str
) -> None:
    with pytest.raises(UnfitValue) as info:
        from_record(CanaryThresholds, record)
    assert (info.value.name, info.value.expected) == (name, expected)


def test_a_recorded_choice_outside_its_choices_does_not_fit() -> None:
    assert from_record(ProbeSettings, {"tool_call": "auto"}).tool_call == "auto"
    with pytest.raises(UnfitValue) as info:
        from_record(ProbeSettings, {"tool_call": "forced"})
    assert (info.value.name, info.value.value) == ("tool_call", "forced")
    assert info.value.expected == "one of required, auto, off"


def _table(cls: type, prefix: str) -> list[str]:
    return model_table(model_schema(section_model(cls), null_is_default=False), prefix)


def test_a_choice_setting_is_validated_by_its_choices() -> None:
    tool_call = section_model(ProbeSettings).model_fields["tool_call"]
    assert field_view(tool_call) == Field(
        "str", default="required", choices=("required", "auto", "off")
    )
    doc = ProbeSettings.__dataclass_fields__["tool_call"].metadata["dsv4ops.setting"].doc
    assert tool_call.description == doc
    assert "`required` / `auto` / `off`" in _table(ProbeSettings, "probe.")[2]


@dataclasses.dataclass(frozen=True)
class _Probe:
    """A section as another one is declared (e.g. a `probe.tool_call` setting)."""

    tool_call: bool = setting(True, doc="the probe sends a tool call")
    timeout_s: float = setting(10.0, minimum=0.1, maximum=600.0, doc="seconds the probe waits")


def test_a_new_section_is_one_dataclass_away() -> None:
    fields = section_model(_Probe).model_fields
    assert {k: field_view(f) for k, f in fields.items()} == {
        "tool_call": Field("bool", default=True),
        "timeout_s": Field("float", default=10.0, minimum=0.1, maximum=600.0),
    }
    assert fields["timeout_s"].description == "seconds the probe waits"
    assert _table(_Probe, "probe.")[2] == (
        "| `probe.tool_call` | bool | `true` | - | the probe sends a tool call |"
    )


def test_a_field_not_declared_with_setting_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose:
        n: int = 3

    with pytest.raises(TypeError, match="Loose.n is not declared with setting"):
        list(declared(Loose))
