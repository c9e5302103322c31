from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testing.profiles import make_profiles_dir


@pytest.fixture
def pdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp profiles dir (base.yaml + targets.yaml) that load_profile/load_targets use."""
    directory = make_profiles_dir(tmp_path)
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(directory))
    monkeypatch.chdir(tmp_path)
    return directory


@pytest.fixture
def write(pdir: Path) -> Callable[[str, str], Path]:
    def _write(name: str, text: str) -> Path:
        path = pdir / f"{name}.yaml"
        path.write_text(text)
        return path

    return _write
