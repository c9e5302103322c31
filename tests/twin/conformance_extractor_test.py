"""tools/extract_twin_conformance.py: on the real SGLang 0.5.23 wheel (the pinned one `make install`
fetches into the project cache, tools/fetch_sglang_wheel.sh, so CI runs it) it reproduces the
committed fixture byte for byte; on a miniature SGLang tree
(fixtures/sglang_synthetic) its reading of routes, metrics, stream keys and the tool-call id is
checked fact by fact, so the tool's logic is tested in CI too."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tools.sglang_wheel import MISSING, WHEEL
from tools.twin_conformance import extract, main, render

FIXTURES = Path(__file__).parent / "fixtures"
SURFACE_PATH = FIXTURES / "sglang_0_5_23_surface.json"
SYNTHETIC = FIXTURES / "sglang_synthetic"
SURFACE = json.loads(SURFACE_PATH.read_text())


# --- the extractor --------------------------------------------------------------------------


@pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)
def test_extractor_reproduces_the_committed_fixture_from_the_real_wheel() -> None:
    assert render(extract(WHEEL)) == SURFACE_PATH.read_text(), (
        "regenerate: tools/extract_twin_conformance.py WHEEL -o " + str(SURFACE_PATH)
    )


@pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)
def test_extractor_reads_an_unpacked_wheel_like_the_wheel(tmp_path: Path) -> None:
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(WHEEL) as zf:  # the package's sources: all the extractor reads
        zf.extractall(
            unpacked, [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")]
        )
    from_dir = extract(unpacked)
    assert from_dir.pop("wheel") == {"file": None, "sha256": None, "unpacked_dir": str(unpacked)}
    committed = dict(SURFACE)
    committed.pop("wheel")
    assert from_dir == committed


def _facts(fx: dict[str, Any]) -> dict[str, Any]:
    metrics = {m["name"]: m for m in fx["metrics"]}
    return {
        "endpoints": {(e["path"], tuple(e["methods"])) for e in fx["endpoints"]},
        "metrics": metrics,
        "stream": fx["chat_stream"],
        "tool": fx["tool_call_delta"],
    }


def test_extractor_on_a_miniature_sglang_tree(tmp_path: Path) -> None:
    out = tmp_path / "surface.json"
    assert main([str(SYNTHETIC), "-o", str(out)]) == 0
    fx = json.loads(out.read_text())
    f = _facts(fx)
    assert fx["sglang_version"] == "9.9.9" and fx["wheel"]["sha256"] is None
    assert f["endpoints"] == {
        ("/health", ("GET",)),
        ("/health_generate", ("GET",)),
        ("/generate", ("POST", "PUT")),
        ("/predict", ("POST",)),
        ("${TINY_ROOT_ROUTE}", ("GET",)),
        ("/v1/loads", ("GET",)),
        ("/v1/realtime", ("WEBSOCKET",)),
        ("/metrics", ("*",)),
    }
    m = f["metrics"]
    assert "vllm:requests_total" not in m and len(m) == 8
    assert m["sglang:realtime_tokens_total"]["family"] == "sglang:realtime_tokens"
    assert m["sglang:realtime_tokens_total"]["labels"] == [
        "model_name",
        "engine_type",
        "tp_rank",
        "mode",
    ]
    assert m["sglang:realtime_tokens_total"]["label_values"] == {
        "mode": ["decode", "prefill_compute"]
    }
    assert (
        m["sglang:num_paused_reqs"]["pid_label"] and not m["sglang:num_running_reqs"]["pid_label"]
    )
    assert m["sglang:bucketed"]["labels"][-2:] == ["gt", "le"]
    assert m["sglang:lora_slots"]["condition"] == "enable_lora"
    assert m["sglang:time_to_first_token_seconds"]["labels"] == ["model_name"]
    assert fx["metric_label_sets"]["SchedulerMetricsCollector"]["optional"] == ["priority"]
    s = f["stream"]
    assert s["role"]["delta"] == {"keys": ["content", "reasoning_content", "role"], "optional": []}
    assert s["content"]["chunk"] == {"keys": ["choices", "id"], "optional": ["usage"]}
    assert s["finish"]["delta"]["keys"] == ["reasoning_content"]
    assert s["tool_call"]["delta"]["keys"] == ["content", "role", "tool_calls"]
    assert s["tool_call"]["chunk"]["keys"] == ["choices", "id", "object", "usage"]
    assert f["tool"]["id"]["pattern"] == "^call_[0-9a-f]{16}$"
    assert f["tool"]["one_delta_per_call"] is True
    # The same tree as a wheel: same facts, plus the wheel's sha256.
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(SYNTHETIC.rglob("*.py")):
            zf.write(path, path.relative_to(SYNTHETIC).as_posix())
    from_wheel = extract(wheel)
    assert len(from_wheel["wheel"]["sha256"]) == 64
    assert _facts(from_wheel) == f


def test_extractor_names_a_missing_anchor_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(SYNTHETIC, tree)
    chat = tree / "sglang/srt/entrypoints/openai/serving_chat.py"
    chat.write_text(chat.read_text().replace('f"call_{uuid.uuid4().hex[:16]}"', '"fixed"'))
    assert main([str(tree)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "_process_tool_call_id builds no call_<hex> id" in err
    not_a_wheel = tmp_path / "x.whl"
    not_a_wheel.write_text("nope")
    assert main([str(not_a_wheel)]) == 1
    assert "not a wheel" in capsys.readouterr().err


# --- the live diff (tools/twin_conformance/live.py), on the shapes of the last real run --------


def test_the_live_diff_passes_the_recorded_run_and_flags_what_it_does_not_explain() -> None:
    from tools.twin_conformance.live import EXPLAINED, diff

    recorded = json.loads(
        (
            Path(__file__).resolve().parents[2] / "tools/sglang-cpu/observed/" "live-shapes.json"
        ).read_text()
    )
    twin, real = recorded["twin"], recorded["real"]
    assert diff(twin, real) == []
    assert twin["chat.tool_required"] != real["chat.tool_required"]  # explained, not equal
    assert "chat.tool_required" in EXPLAINED
    changed = {
        **twin,
        "chat.stop": {**twin["chat.stop"], "matched_stop": False},
        "metrics.families": [*twin["metrics.families"], "sglang:twin_only"],
    }
    assert [line.split(":")[0] for line in diff(changed, real)] == ["chat.stop", "metrics.families"]
    labels = {**twin, "metrics.idle": {**twin["metrics.idle"], "sglang:num_running_reqs": []}}
    assert [line.split(":")[0] for line in diff(labels, real)] == ["metrics.idle"]
