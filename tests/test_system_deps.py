"""make test on a machine without Java or Chromium: their tests skip, saying why; CI
(ZERO_RENAME_TESTS_REQUIRE_ALL) runs them all."""

from __future__ import annotations

import shutil

import pytest

from tests import conftest


def test_missing_programs_skip_their_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZERO_RENAME_TESTS_REQUIRE_ALL", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "chromium" else "/x")
    missing = conftest._missing_programs()
    assert list(missing) == ["browser"]
    assert "Chromium not found" in missing["browser"] and "system-deps" in missing["browser"]


def test_ci_runs_every_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZERO_RENAME_TESTS_REQUIRE_ALL", "1")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert conftest._missing_programs() == {}


def test_make_test_and_ci_share_the_install_step() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert "deploy/system-deps.sh" in (root / "Makefile").read_text()
    ci = (root / ".ci" / "run").read_text()
    assert "deploy/system-deps.sh --strict" in ci and "ZERO_RENAME_TESTS_REQUIRE_ALL=1" in ci
