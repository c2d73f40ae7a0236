"""make test on a machine without Java, Chromium or Python 3.13 (LocalStack's venv):
their tests skip, saying why; CI (ZERO_RENAME_TESTS_REQUIRE_ALL) runs them all."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import conftest, servers


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
    makefile = (root / "Makefile").read_text()
    assert "deploy/system-deps.sh" in makefile
    # LocalStack's venv, where it can be, for the tier that runs its cases.
    assert "test-extended: $(STAMP) localstack-venv" in makefile
    ci = (root / ".ci" / "run").read_text()
    assert "deploy/system-deps.sh --strict" in ci
    # CI insists on every test of both tiers: every S3 server, every browser test.
    assert "ZERO_RENAME_TESTS_REQUIRE_ALL=1 make test\n" in ci
    assert "ZERO_RENAME_TESTS_REQUIRE_ALL=1 make test-extended\n" in ci


@pytest.mark.parametrize(
    "python313,require_all,outcome",
    [
        (None, "", pytest.skip.Exception),
        (None, "1", pytest.fail.Exception),
        ("/usr/bin/python3.13", "", pytest.fail.Exception),
    ],
)
def test_localstack_skips_only_without_python_3_13(
    monkeypatch: pytest.MonkeyPatch, python313: str | None, require_all: str, outcome: type
) -> None:
    monkeypatch.setenv("ZERO_RENAME_TESTS_REQUIRE_ALL", require_all)
    monkeypatch.setattr(conftest, "python313", lambda: python313)
    with pytest.raises(outcome, match="Python 3.13") as raised:
        conftest._localstack_missing()
    assert "make venv" in str(raised.value)


def test_a_failing_python_3_13_shim_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shim = tmp_path / "python3.13"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setattr(servers, "_PYTHON313", (str(shim),))
    assert servers.python313() is None


def test_localstack_cases_run_on_one_worker() -> None:
    group = conftest.worker_group
    assert group("tests/core/s3/test_store.py::test_bad_credentials[localstack]") == "localstack"
    assert (
        group("tests/core/protocol/test_protocol.py::test_abort[magic-localstack]") == "localstack"
    )
    assert (
        group("tests/core/protocol/test_protocol.py::test_abort[magic-localstack-2]")
        == "localstack"
    )
    assert group("tests/core/s3/test_store.py::test_bad_credentials[moto]") is None
    assert group("tests/core/s3/test_store.py::test_bad_credentials[localstack]", True) is None
