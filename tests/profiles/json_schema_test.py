"""The JSON Schema editors use (profiles/json_schema.py): the shipped files are what
`profile schema` prints, every shipped YAML names and passes them, and the schema refuses what
the loader refuses (and accepts what it accepts) on the cases it can express."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from dsv4ops._yaml import load_with_lines
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import load_profile
from dsv4ops.profiles.json_schema import (
    PROFILE_SCHEMA_FILE,
    TARGETS_SCHEMA_FILE,
    modeline,
    profile_json_schema,
    targets_json_schema,
    to_text,
)
from dsv4ops.profiles.target_spec import BoxTarget, EndpointTarget, MetricsFields, SSHFields
from dsv4ops.profiles.targets import load_targets
from dsv4ops.settings import CanaryThresholds
from testing.profiles import child, make_profiles_dir, targets_yaml

SHIPPED = Path(__file__).resolve().parents[2] / "profiles"
SHIPPED_YAML = sorted(p.name for p in SHIPPED.glob("*.yaml"))


def _schema_file(yaml_name: str) -> str:
    return TARGETS_SCHEMA_FILE if yaml_name == "targets.yaml" else PROFILE_SCHEMA_FILE


def _errors(schema: JSONObject, text: str) -> list[str]:
    data, _ = load_with_lines(text)
    found = Draft202012Validator(schema).iter_errors(data)
    return sorted(".".join(str(p) for p in e.absolute_path) + f": {e.validator}" for e in found)


@pytest.mark.parametrize(
    ("name", "generated"),
    [(PROFILE_SCHEMA_FILE, profile_json_schema), (TARGETS_SCHEMA_FILE, targets_json_schema)],
)
def test_the_shipped_schema_is_what_profile_schema_prints(name: str, generated: object) -> None:
    assert callable(generated)
    schema = generated()
    Draft202012Validator.check_schema(schema)
    assert (SHIPPED / "schema" / name).read_text(encoding="utf-8") == to_text(schema), (
        f"profiles/schema/{name} is stale: run dsv4ops profile schema"
        f"{' --targets' if name == TARGETS_SCHEMA_FILE else ''} -o profiles/schema/{name}"
    )


@pytest.mark.parametrize("name", SHIPPED_YAML)
def test_every_shipped_yaml_names_its_schema_first_and_passes_it(name: str) -> None:
    text = (SHIPPED / name).read_text(encoding="utf-8")
    line = modeline(_schema_file(name))
    assert text.splitlines()[0] == line
    schema_path = SHIPPED / line.split("$schema=", 1)[1]
    assert schema_path.is_file()  # the path an editor resolves, relative to the YAML file
    assert _errors(json.loads(schema_path.read_text(encoding="utf-8")), text) == []


def _leaves(schema: JSONObject, prefix: str = "") -> list[tuple[str, JSONObject]]:
    out: list[tuple[str, JSONObject]] = []
    for key, prop in schema["properties"].items():
        if "properties" in prop:
            out += _leaves(prop, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", prop))
    return out


def test_every_key_has_a_doc_an_editor_shows() -> None:
    leaves = _leaves(profile_json_schema())
    assert len(leaves) > 50 and [path for path, p in leaves if not p.get("description")] == []
    models = (BoxTarget, SSHFields, EndpointTarget, MetricsFields)
    undocumented = [
        f"{m.__name__}.{k}" for m in models for k, f in m.model_fields.items() if not f.description
    ]
    assert undocumented == []


def test_a_key_declared_in_the_model_is_in_the_json_schema_with_its_bounds() -> None:
    port = profile_json_schema()["properties"]["router"]["properties"]["port"]
    assert port["type"] == ["integer", "null"] and (port["minimum"], port["maximum"]) == (1, 65535)
    assert port["default"] == 8000 and port["description"].startswith("the port clients send")
    canary = profile_json_schema()["properties"]["canary"]["properties"]
    assert list(canary) == list(CanaryThresholds.model_fields)  # derived, in order


def test_a_nullable_key_names_its_type_and_bounds_for_an_editor() -> None:
    decode = profile_json_schema()["properties"]["decode"]["properties"]
    fraction = decode["mem_fraction_static"]
    assert fraction["type"] == ["number", "null"] and fraction["default"] is None
    assert (fraction["minimum"], fraction["maximum"]) == (0.05, 0.99)
    assert decode["kv_cache_dtype"]["enum"][-1] is None  # the default, written as null


# Each refused by the loader too (checked below): what the schema says is what load_profile says.
BAD_PROFILES = {
    "unknown top-level key": ("flagz:\n  overlap_schedule: on\n", [": additionalProperties"]),
    "unknown nested key": (
        "router:\n  health_check:\n    intervall_secs: 5\n",
        ["router.health_check: additionalProperties"],
    ),
    "wrong type": ("decode:\n  tp: four\n", ["decode.tp: type"]),
    "port out of bounds": ("router:\n  port: 70000\n", ["router.port: maximum"]),
    "rate out of bounds": (
        "canary:\n  corruption_max_rate: 1.5\n",
        ["canary.corruption_max_rate: maximum"],
    ),
    "not one of the choices": (
        "prefill:\n  kv_cache_dtype: fp16\n",
        ["prefill.kv_cache_dtype: enum"],
    ),
    "not on or off": ("flags:\n  overlap_schedule: maybe\n", ["flags.overlap_schedule: anyOf"]),
    "not a bucket spec": ("flags:\n  decode_buckets: step8:abc\n", ["flags.decode_buckets: anyOf"]),
    "a newline in an argv word": (
        'decode:\n  extra_args: ["--served\\nx"]\n',
        ["decode.extra_args.0: anyOf"],
    ),
    "a space in a name": ('model:\n  served_name: "two words"\n', ["model.served_name: pattern"]),
    "a section that is a list": ("router: [1, 2]\n", ["router: type"]),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_a_bad_profile_is_refused_by_the_schema_and_by_the_loader(
    case: str, tmp_path: Path
) -> None:
    extra, expected = BAD_PROFILES[case]
    text = child(extra)
    assert _errors(profile_json_schema(), text) == expected
    directory = make_profiles_dir(tmp_path, bad=text)
    with pytest.raises(ProfileError):
        load_profile(directory / "bad.yaml")


def test_a_whole_profile_needs_its_required_keys_a_child_does_not() -> None:
    whole = "schema_version: 1\nmodel: {served_name: x}\nprefill: {gpus: [0], tp: 1}\n"
    assert _errors(profile_json_schema(), whole) == [": required", "model: required"]
    assert _errors(profile_json_schema(), child("description: inherits the rest\n")) == []
    assert _errors(profile_json_schema(), "extends: base\n") == [": required"]  # schema_version


# Spellings the loader takes that a too-strict schema would mark in an editor.
ACCEPTED = {
    "on/off as quoted words": 'flags:\n  overlap_schedule: "On"\n  multi_stream_overlap: "no"\n',
    "a bucket spec with a range": "flags:\n  decode_buckets: step4:40-96\n",
    "an explicit bucket list": "flags:\n  decode_buckets: [8, 16, 96]\n",
    "null takes the default": "description: null\nrouter:\n  port: null\n",
    "numbers in argv and env": (
        "decode:\n  extra_args: [--max-prefill-tokens, 16384]\n  env: {N: 2, DEBUG: true}\n"
    ),
    "an empty kernel package": 'kernel_package: ""\n',
    "a section left empty": "canary:\n",
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_the_loader_accepts_the_schema_accepts(case: str, tmp_path: Path) -> None:
    text = child(ACCEPTED[case])
    directory = make_profiles_dir(tmp_path, ok=text)
    load_profile(directory / "ok.yaml")
    assert _errors(profile_json_schema(), text) == []


BAD_TARGETS = {
    "a process key on an endpoint target": (
        "  k8s:\n    transport: endpoint\n    router_url: http://r:80\n    gpus: [0]\n",
        ["targets.k8s: additionalProperties"],
    ),
    "an ssh target without its workdir": (
        "  far:\n    transport: ssh\n    ssh: {host: h}\n    gpus: [0]\n",
        ["targets.far: required"],
    ),
    "an unknown transport": (
        "  odd:\n    transport: carrier-pigeon\n    gpus: [0]\n    workdir: /w\n",
        ["targets.odd.transport: enum"],
    ),
    "a negative port offset": (
        "  shifted:\n    transport: local\n    gpus: [0]\n    workdir: /w\n    port_offset: -1\n",
        ["targets.shifted.port_offset: minimum"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TARGETS))
def test_a_bad_target_is_refused_by_the_schema_and_by_the_loader(case: str, tmp_path: Path) -> None:
    entry, expected = BAD_TARGETS[case]
    text = targets_yaml() + entry
    assert _errors(targets_json_schema(), text) == expected
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError):
        load_targets(path)


def test_the_test_targets_pass_the_schema() -> None:
    assert _errors(targets_json_schema(), targets_yaml()) == []
