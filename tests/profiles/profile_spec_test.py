"""The profile's pydantic models (profiles/profile_spec.py) are its one declaration: a whole
profile validates against them, what they refuse the loader refuses with the same words, and the
per-key view the error texts read is derived from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from dsv4ops.apikey import ApiKeyRef
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import list_profiles, load_profile
from dsv4ops.profiles.profile_spec import PrefillSection, ProfileSpec
from dsv4ops.profiles.render import render
from dsv4ops.profiles.schema import describe
from dsv4ops.routerkind import RouterKind
from testing.profiles import child, make_profiles_dir


def test_every_shipped_profile_without_extends_validates_as_a_whole() -> None:
    whole = [p for p in list_profiles() if "extends" not in yaml.safe_load(p.read_text())]
    assert whole, "a shipped profile declares every required key"
    for path in whole:
        spec = ProfileSpec.model_validate(yaml.safe_load(path.read_text()))
        profile = load_profile(path)
        assert list(spec.decode.gpus) == list(profile.decode.gpus)
        assert spec.prefill.bootstrap_port == profile.bootstrap_port
        assert spec.canary == profile.canary  # the declared model itself, not a copy of it


def test_the_models_refuse_what_the_loader_refuses() -> None:
    data = yaml.safe_load(_whole().read_text())
    data["decode"] = {**data["decode"], "tp": "four", "bogus": 1}
    with pytest.raises(ValidationError) as info:
        ProfileSpec.model_validate(data)
    kinds = {(e["loc"], e["type"]) for e in info.value.errors()}
    assert (("decode", "tp"), "int_type") in kinds
    assert (("decode", "bogus"), "extra_forbidden") in kinds


def test_the_view_the_error_texts_read_is_derived_from_the_models() -> None:
    tp = ProfileSpec.model_fields["decode"].annotation.model_fields["tp"]  # type: ignore[union-attr]
    assert (tp.is_required(), describe(tp)) == (True, "an integer >= 1")
    prefill, decode = PrefillSection.model_fields, ProfileSpec.model_fields
    assert [*decode["decode"].annotation.model_fields, "bootstrap_port"] == list(prefill)  # type: ignore[union-attr]
    assert prefill["port"].default == 30000


def test_a_bad_value_is_named_by_its_key_with_what_its_field_takes(tmp_path: Path) -> None:
    data = yaml.safe_load(_whole().read_text())
    data["decode"] = {**data["decode"], "page_size": 4096}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).endswith(
        "decode.page_size: expected an integer from 1 to 1024, got 4096"
    )


def _whole() -> Path:
    return next(p for p in list_profiles() if "extends" not in yaml.safe_load(p.read_text()))


def test_the_profile_holds_its_server_sections_and_their_env_order_changes_nothing(
    tmp_path: Path,
) -> None:
    ba = child("decode:\n  env: {B_VAR: '2', A_VAR: '1'}\n")
    ab = child("decode:\n  env: {A_VAR: '1', B_VAR: '2'}\n")
    directory = make_profiles_dir(tmp_path, ba=ba, ab=ab)
    p, q = load_profile(directory / "ba.yaml"), load_profile(directory / "ab.yaml")
    assert (p.prefill.role, p.decode.role) == ("prefill", "decode")
    decode = p.to_dict()["decode"]
    assert list(decode)[0] == "role" and "bootstrap_port" not in p.to_dict()["prefill"]
    assert list(decode["env"]) == sorted(decode["env"]) and decode == q.to_dict()["decode"]
    assert render(p).commands_hash == render(q).commands_hash


def test_the_profile_holds_its_router_section_and_the_key_it_names(tmp_path: Path) -> None:
    text = child("router:\n  api_key: {env: DSV4_KEY}\n  env: {ZZ: '1', AA: 2}\n  kind: smg\n")
    p = load_profile(make_profiles_dir(tmp_path, x=text) / "x.yaml")
    assert p.router.router_kind is RouterKind.SMG and p.router_key == ApiKeyRef(env="DSV4_KEY")
    router = p.to_dict()["router"]
    assert list(router) == [
        *("port", "prometheus_port", "policy", "health_check", "extra_args", "env"),
        *("api_key", "kind", "prefill_policy", "decode_policy", "stop_grace_s"),
    ]
    assert router["env"] == {"AA": "2", "ZZ": "1"} and list(router["env"]) == ["AA", "ZZ"]
    assert (router["api_key"], router["kind"]) == ({"env": "DSV4_KEY", "file": None}, "smg")
    assert render(p).component("router").api_key == ApiKeyRef(env="DSV4_KEY")


def test_every_on_off_flag_declares_a_switch_sglang_takes() -> None:
    """Adding a flag is one field of FlagsSection (docs/architecture.md, "Adding a flag"): every
    key of `flags` but the buckets carries its Switch, or it would render nothing; its names are
    its own; what it renders is a flag SGLang 0.5.23's parser takes (without a value) or an
    environment variable; the suite it asks for is one the canary runs."""
    from dsv4ops.canary.runner import ALL_ORDER
    from dsv4ops.profiles._flag_tables import SGLANG_SERVER_TABLE
    from dsv4ops.profiles.profile_spec import SWITCHES, FlagsSection

    assert [n for n, _ in SWITCHES] == [
        n for n in FlagsSection.model_fields if n != "decode_buckets"
    ]
    for names in ([s.toggle for _, s in SWITCHES], [s.column for _, s in SWITCHES]):
        assert len(set(names)) == len(names) and "buckets" not in names
    for flag, switch in SWITCHES:
        assert switch.sides and set(switch.sides) <= {"prefill", "decode"}, flag
        args = (*switch.argv_on, *switch.argv_off)
        assert args or switch.env, f"{flag} renders nothing"
        assert all(SGLANG_SERVER_TABLE[a][0] == 0 for a in args), flag
        assert switch.env is None or switch.env.isupper(), flag
        assert switch.suite is None or switch.suite in ALL_ORDER, flag
        assert switch.on_words and switch.off_words, flag
