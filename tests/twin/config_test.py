from __future__ import annotations

import pytest

from dsv4ops.twin.config import TwinConfigError, load_config
from dsv4ops.twin.hazards import HazardBoard


def test_defaults_are_the_seed_numbers() -> None:
    cfg = load_config({})
    assert (cfg.step_a_ms, cfg.step_b_ms, cfg.overlap_hidden_ms) == (18.0, 1.05, 5.0)
    assert cfg.time_scale == 1.0 and cfg.eager_factor == 2.0
    assert cfg.health_timeout_s == 20.0 and cfg.waiting_timeout_s == 300.0


def test_env_overrides_and_sglang_timeout_names() -> None:
    cfg = load_config(
        {
            "DSV4_TWIN_TIME_SCALE": "0.1",
            "DSV4_TWIN_STEP_A_MS": "20",
            "SGLANG_HEALTH_CHECK_TIMEOUT": "7",
            "DSV4_TWIN_SEED": "3",
        }
    )
    assert cfg.time_scale == 0.1 and cfg.step_a_ms == 20.0 and cfg.seed == 3
    assert cfg.health_timeout_s == 7.0
    assert cfg.wall(2.0) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DSV4_TWIN_FORCE": "wedge,melt"}, "unknown hazard"),
        ({"DSV4_TWIN_STEP_B_MS": "-1"}, "must not be negative"),
        ({"DSV4_TWIN_TIME_SCALE": "0"}, "must be > 0"),
        ({"DSV4_TWIN_EAGER_FACTOR": "0.5"}, "EAGER_FACTOR must be >= 1"),
        ({"DSV4_TWIN_HAZARDS": "maybe"}, "expected auto or off"),
    ],
)
def test_bad_values_are_rejected_with_the_variable_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(TwinConfigError, match=message):
        load_config(env)


def test_hazard_board_force_off_and_auto() -> None:
    board = HazardBoard(load_config({"DSV4_TWIN_FORCE": "corrupt"}))
    assert board.active("corrupt", condition=False)
    assert board.active("wedge", condition=True) and not board.active("wedge", condition=False)
    off = HazardBoard(load_config({"DSV4_TWIN_HAZARDS": "off"}))
    assert not off.active("wedge", condition=True)
    off.set("wedge", "auto")
    assert off.active("wedge", condition=True)
    with pytest.raises(ValueError, match="unknown state"):
        off.set("wedge", "sometimes")
