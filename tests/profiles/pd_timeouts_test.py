"""The PD timeouts a profile sets (issue 44 item 2): validated, rendered into the launch env,
shipped explicit. NIXL sends the decode no failure notice (sglang#36033): the decode's waiting
timeout is how long a silently lost transfer holds its request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from testing.profiles import child

REPO_PROFILES = Path(__file__).resolve().parents[2] / "profiles"
WAITING = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
BOOTSTRAP = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"


@pytest.mark.parametrize("value", ["29", "3601", "90.5", "abc", ""])
def test_a_timeout_out_of_bounds_or_not_whole_seconds_is_an_error_at_its_line(
    write: Callable[[str, str], Path], value: str
) -> None:
    path = write("p", child(f"decode:\n  env:\n    {WAITING}: '{value}'\n"))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    assert str(info.value).startswith(f"{path}:5: decode.env.{WAITING}: expected whole seconds")
    assert "from 30 to 3600" in str(info.value)


def test_an_unset_timeout_is_a_warning_naming_the_silent_failure(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    base = (pdir / "base.yaml").read_text()
    (pdir / "base.yaml").write_text(base.replace(f'  env: {{{BOOTSTRAP}: "300"}}\n', ""))
    write("p", child(f"decode:\n  env:\n    {WAITING}: '120'\n"))
    (w,) = load_profile("p").warnings
    assert w.code == "pd-timeout-unset" and w.where.endswith("prefill.env")
    assert BOOTSTRAP in w.message and "sglang#36033" in w.message


def test_the_shipped_profiles_set_both_and_render_them_into_the_launch_env() -> None:
    targets = load_targets(REPO_PROFILES / "targets.yaml")
    for name in ("baseline", "overlap-on", "buckets-step4", "multi-stream-on"):
        d = render(load_profile(str(REPO_PROFILES / f"{name}.yaml")), targets["box"])
        assert d.component("decode").env[WAITING] == "300"
        assert d.component("prefill").env[BOOTSTRAP] == "300"
        assert d.pd_timeouts() == {
            "decode_waiting_s": 300,
            "decode_waiting_s_source": "profile",
            "prefill_bootstrap_s": 300,
            "prefill_bootstrap_s_source": "profile",
        }
    tiny = load_profile(str(REPO_PROFILES / "tiny-cpu.yaml"))
    assert tiny.decode.env_dict[WAITING] == tiny.prefill.env_dict[BOOTSTRAP] == "300"
