from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.profiles.load import list_profiles
from dsv4ops.routerkind import RouterKind
from testing.profiles import ParseFailed, child, sglang_server_parser, smg_parse, targets_yaml

REPO_PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_json_contract_shape(pdir: Path) -> None:
    rendered = render(load_profile("base"), load_targets()["box"])
    data = json.loads(json.dumps(rendered.to_json()))
    assert data["profile"] == "base"
    assert [c["name"] for c in data["components"]] == ["prefill", "decode", "router"]
    for comp in data["components"]:
        assert {"name", "argv", "env", "host", "port"} <= set(comp)
        assert comp["argv"][1] == "-m" and comp["argv"][0] == "/opt/venv/bin/python"


def test_server_commands_for_the_box(pdir: Path) -> None:
    r = render(load_profile("base"), load_targets()["box"])
    prefill, decode = r.component("prefill"), r.component("decode")
    for comp, mode, base_gpu in ((prefill, "prefill", "0"), (decode, "decode", "4")):
        assert comp.argv[2] == "sglang.launch_server"
        assert _value(comp.argv, "--disaggregation-mode") == mode
        assert _value(comp.argv, "--disaggregation-transfer-backend") == "nixl"
        assert _value(comp.argv, "--disaggregation-bootstrap-port") == "8998"
        assert (
            _value(comp.argv, "--base-gpu-id") == base_gpu and _value(comp.argv, "--tp-size") == "4"
        )
        assert _value(comp.argv, "--host") == "0.0.0.0" and "--enable-metrics" in comp.argv
        assert comp.env_dict["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "0"
        assert comp.host == "box.example"
    buckets = decode.argv[
        decode.argv.index("--cuda-graph-bs-decode") + 1 : decode.argv.index(
            "--disable-overlap-schedule"
        )
    ]
    assert buckets == tuple(
        str(b) for b in (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96)
    )
    assert (
        "--disable-overlap-schedule" not in prefill.argv
        and "--cuda-graph-bs-decode" not in prefill.argv
    )
    assert prefill.ports == (30000, 8998) and decode.ports == (30001,)


def test_router_command_has_explicit_bootstrap_port_and_health_settings(pdir: Path) -> None:
    router = render(load_profile("base"), load_targets()["box"]).component("router")
    argv = router.argv
    assert argv[2] == "sglang_router.launch_router" and "--pd-disaggregation" in argv
    i = argv.index("--prefill")
    assert argv[i + 1 : i + 3] == ("http://127.0.0.1:30000", "8998")
    assert _value(argv, "--decode") == "http://127.0.0.1:30001"
    assert (
        _value(argv, "--prometheus-port") == "29000"
        and _value(argv, "--health-check-timeout-secs") == "30"
    )
    assert router.ports == (8000, 29000) and router.metrics_port == 29000


def test_flags_change_the_commands(write: Callable[[str, str], Path]) -> None:
    write("p", child("flags:\n  overlap_schedule: on\n  multi_stream_overlap: on\n"))
    r = render(load_profile("p"), load_targets()["box"])
    assert "--disable-overlap-schedule" not in r.component("decode").argv
    assert r.component("decode").env_dict["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "1"
    assert r.component("prefill").env_dict["SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"] == "1"


def test_twin_target_same_args_other_module_offset_ports_and_twin_env(pdir: Path) -> None:
    p = load_profile("base")
    box, twin = render(p, load_targets()["box"]), render(p, load_targets()["twin-local"])
    for name in ("prefill", "decode"):
        b, t = box.component(name), twin.component(name)
        assert t.argv[2] == "dsv4ops.twin.launch_server"
        assert len(t.argv) == len(b.argv)
        assert t.env_dict["DSV4_TWIN_SEED"] == "7" and "DSV4_TWIN_SEED" not in b.env_dict
        assert _value(t.argv, "--host") == "127.0.0.1"
    assert twin.component("prefill").ports == (31000, 9998)
    assert twin.component("router").argv[2] == "sglang_router.launch_router"
    assert twin.component("router").ports == (9000, 30000)
    assert _value(twin.component("decode").argv, "--disaggregation-bootstrap-port") == "9998"


def test_extra_args_and_env_appended(write: Callable[[str, str], Path]) -> None:
    write(
        "p",
        child(
            "decode:\n  extra_args: ['--watchdog-timeout', '600']\n  env: {UCX_TLS: 'cuda_copy,cuda_ipc,tcp'}\n"
        ),
    )
    d = render(load_profile("p"), load_targets()["box"]).component("decode")
    assert (
        d.argv[-2:] == ("--watchdog-timeout", "600")
        and d.env_dict["UCX_TLS"] == "cuda_copy,cuda_ipc,tcp"
    )


def test_commands_hash_is_stable_and_sensitive(write: Callable[[str, str], Path]) -> None:
    box = load_targets()["box"]
    h1 = render(load_profile("base"), box).commands_hash
    assert h1 == render(load_profile("base"), box).commands_hash and len(h1) == 64
    write("p", child("flags:\n  overlap_schedule: on\n"))
    assert render(load_profile("p"), box).commands_hash != h1
    write("q", child("description: only the description differs\n"))
    assert render(load_profile("q"), box).commands_hash == h1


def test_render_without_target_uses_the_box(pdir: Path) -> None:
    assert render(load_profile("base")).target == "box"


def test_bad_targets_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(targets_yaml().replace("launcher: twin", "launcher: docker"))
    with pytest.raises(ProfileError) as info:
        load_targets(path)
    assert info.value.key == "targets.twin-local.launcher" and "one of sglang, twin" in str(
        info.value
    )
    path.write_text(
        targets_yaml().replace("    workdir: work\n", "    workdir: work\n    wrkdir: x\n")
    )
    with pytest.raises(ProfileError, match="targets.twin-local.wrkdir: unknown key"):
        load_targets(path)


def _shipped() -> list[Path]:
    return list_profiles(REPO_PROFILES)


def test_shipped_profiles_cover_the_seed_situations() -> None:
    names = {p.stem for p in _shipped()}
    assert {"baseline", "overlap-on", "buckets-step4"} <= names
    base = load_profile(REPO_PROFILES / "baseline.yaml")
    assert not base.flags.overlap_schedule and not base.flags.multi_stream_overlap
    assert base.decode_buckets[-1] == 96 and base.decode_buckets[-4:] == (
        72,
        80,
        88,
        96,
    )
    assert base.warnings == ()
    assert load_profile(REPO_PROFILES / "overlap-on.yaml").flags.overlap_schedule
    step4 = load_profile(REPO_PROFILES / "buckets-step4.yaml").decode_buckets
    assert {56, 60, 64} <= set(step4)
    targets = load_targets(REPO_PROFILES / "targets.yaml")
    assert targets["box"].transport == "ssh" and targets["box"].launcher == "sglang"
    assert (
        targets["twin-local"].launcher == "twin" and targets["twin-local"].bind_host == "127.0.0.1"
    )
    assert targets["twin-local"].port_offset > 0


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.stem)
def test_shipped_profile_commands_parse_with_sglang_and_router_parsers(path: Path) -> None:
    from sglang_router.launch_router import parse_router_args

    server = sglang_server_parser()
    for target in load_targets(REPO_PROFILES / "targets.yaml").values():
        deployment = render(load_profile(path), target)
        for comp in deployment.components:
            args = list(comp.argv[3:])
            if comp.name == "router" and deployment.router_kind is RouterKind.SMG:
                parsed_smg = smg_parse(args)  # SMG's own parser, from the pinned wheel
                assert parsed_smg["pd_disaggregation"] and parsed_smg["prefill_urls"] == [
                    [args[args.index("--prefill") + 1], int(args[args.index("--prefill") + 2])]
                ]
            elif comp.name == "router":
                parsed = parse_router_args(args)  # the real sglang-router 0.3.2 parser
                assert parsed.pd_disaggregation and parsed.prefill_urls[0][1] == int(
                    args[args.index("--prefill") + 2]
                )
            else:
                ns = server.parse_args(args)
                backend = load_profile(path).prefill.transfer_backend
                assert (
                    ns.disaggregation_mode == comp.name
                    and ns.disaggregation_transfer_backend == backend
                )


def test_rebuilt_sglang_parser_rejects_removed_flags() -> None:
    # The table-based parser must be able to fail, like SGLang's (reference §0 warning 1).
    server = sglang_server_parser()
    base = ["--model-path", "/m"]
    with pytest.raises(ParseFailed, match="ambiguous option: --cuda-graph-max-bs"):
        server.parse_args([*base, "--cuda-graph-max-bs", "64"])
    with pytest.raises(ParseFailed, match="ambiguous option: --cuda-graph-bs"):
        server.parse_args([*base, "--cuda-graph-bs", "8", "16"])
    with pytest.raises(ParseFailed, match="invalid choice"):
        server.parse_args([*base, "--disaggregation-transfer-backend", "rdma"])
    assert server.parse_args([*base, "--cuda-graph-bs-decode", "8", "16"]).cuda_graph_bs_decode == [
        8,
        16,
    ]
