"""The corruption suite's allowance for a silent tool-call stream follows the deployment's
tool-call parser: SGLang 0.5.23 serves deepseekv4 (and deepseekv41) through deepseek-recipe, which
streams a call as it is decoded (no silence to allow for); a detector that sends the call when it
closes (qwen's) keeps `tool_call_silence_s`, as does a parser not known."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from dsv4ops.canary import Thresholds, thresholds_from_profile
from dsv4ops.canary.suites import corruption
from dsv4ops.canary.suites.common import SuiteContext
from dsv4ops.profiles import get_target, load_profile, render
from dsv4ops.usecases.gate import thresholds_of

DETECTOR_S = Thresholds().tool_call_silence_s


@pytest.mark.parametrize(
    ("parser", "allowed_s"),
    [("deepseekv4", 0.0), ("deepseekv41", 0.0), ("qwen", DETECTOR_S), (None, DETECTOR_S)],
)
def test_the_allowance_follows_the_parser(parser: str | None, allowed_s: float) -> None:
    assert Thresholds(tool_call_parser=parser).tool_call_silence() == allowed_s


def test_a_profile_and_a_deployment_carry_their_parser() -> None:
    """From a profile (`canary --profile`) and from a deployment's record (the gate, `canary`
    on the deployed unit): the decode's --tool-call-parser as rendered."""
    tiny = load_profile("tiny-cpu")
    assert thresholds_from_profile(tiny).tool_call_parser == "deepseekv4"
    d = render(tiny, get_target("sglang-cpu"))
    assert thresholds_of(d).tool_call_parser == "deepseekv4"
    assert thresholds_of(d).tool_call_silence() == 0.0
    qwen = dataclasses.replace(
        tiny, model=tiny.model.model_copy(update={"tool_call_parser": "qwen"})
    )
    assert thresholds_from_profile(qwen).tool_call_silence() == DETECTOR_S
    assert thresholds_of(render(qwen, get_target("sglang-cpu"))).tool_call_parser == "qwen"


class _Started(Exception):
    pass


@pytest.mark.parametrize(("parser", "floor_s"), [("deepseekv4", 10.0), ("qwen", DETECTOR_S)])
def test_the_corruption_suite_judges_silence_by_the_parser(
    monkeypatch: pytest.MonkeyPatch, parser: str, floor_s: float
) -> None:
    """The thresholds the suite's harness (its watchdog) runs with: the profile's 10 s stall and
    freeze windows under deepseek-recipe, raised to the allowance under a detector."""
    seen: list[Thresholds] = []

    def harness(ctx: SuiteContext, **_: object) -> None:
        seen.append(ctx.thresholds)
        raise _Started

    monkeypatch.setattr(corruption, "harness", harness)
    th = Thresholds(tool_call_parser=parser, stall_s=10.0, freeze_s=10.0)
    with pytest.raises(_Started):
        asyncio.run(corruption.run_corruption(SuiteContext("http://127.0.0.1:9", thresholds=th)))
    (got,) = seen
    assert (got.stall_s, got.freeze_s) == (floor_s, floor_s)
    assert got.first_token_deadline_s == max(th.first_token_deadline_s, floor_s)
