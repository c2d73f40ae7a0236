"""``jobs history`` and ``partitions`` against the embedded S3 server."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli
from tests.every_state import ABORT_REASON, D1, D3, D5, D6, every_state
from tests.helpers import write_task
from zero_rename.cli import output
from zero_rename.cli.exits import ExitCode
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3


def test_history_and_partitions_of_a_destination_with_a_job_in_every_state(
    cli: Cli, committer: Committer, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = every_state(committer)

    ran = cli("jobs", "history", dest, "--json")
    assert ran.code == 0, ran.err
    rows = ran.json()
    assert [r["job_id"] for r in rows][:3] == [j.job_id for j in made.committed()]
    assert [r["state"] for r in rows] == [
        *["committed"] * 3,
        "aborted",
        "aborted",
        "committing",
        "sealed",
        "setup",
        "setup",
    ]
    first = rows[0]
    assert {k: first[k] for k in ("files", "rows", "bytes", "partitions")} == {
        "files": 3,
        "rows": 23,
        "bytes": 330,
        "partitions": 2,
    }
    assert first["committed_at"].endswith("Z") and first["seconds"] > 0
    assert rows[3]["reason"] == ABORT_REASON and rows[4]["rolled_back"] is True
    newest = cli("jobs", "history", dest, "--limit", "2", "--json").json()
    assert [r["job_id"] for r in newest] == [made.running.job_id, made.claiming.job_id]

    table = cli("jobs", "history", dest).out
    assert table.splitlines()[0].split()[:4] == ["job", "id", "state", "when"]
    assert ABORT_REASON in table and "rolled back: rolled back by hand" in table
    assert "9 job(s) at" in table and "median of 3 commit(s)" in table
    assert "2 of 9 job(s)" in cli("jobs", "history", dest, "--limit", "2").out
    # No id is wrapped, on a terminal of 160 columns or 80: the other columns give
    # way. Each row starts with its job's first 8 characters, or its whole id (--wide).
    pipe_width = output.PIPE_WIDTH
    # The job ids in the order each command shows them.
    jobs = {
        c: [r["job_id"] for r in cli("jobs", c, dest, "--json").json()] for c in ("history", "list")
    }
    for width, wide, shown in ((80, (), 8), (160, (), 8), (160, ("--wide",), 36)):
        monkeypatch.setattr(output, "PIPE_WIDTH", width)
        for command in ("history", "list"):
            lines = cli("jobs", command, dest, *wide).out.splitlines()
            # A row's first line starts at the left edge (the header's is "job id").
            starts = [ln.split()[0] for ln in lines if ln[:1].strip()][1:10]
            assert starts == [j[:shown] for j in jobs[command]], (width, wide, command)
            assert all(len(ln) <= width for ln in lines)
    monkeypatch.setattr(output, "PIPE_WIDTH", pipe_width)

    view = cli("partitions", dest, "--json").json()
    parts = {p["partition"]: p for p in view["partitions"]}
    assert (parts[f"dt={D1}"]["files"], parts[f"dt={D1}"]["rows"]) == (3, 18)
    assert parts[f"dt={D1}"]["job_id"] == made.append.job_id
    assert parts[f"dt={D3}"]["foreign_files"] == 1 and parts[f"dt={D3}"]["rows"] is None
    assert [h["job_id"] for h in parts[f"dt={D5}"]["holders"]] == [made.committing.job_id]
    assert [h["state"] for h in parts[f"dt={D6}"]["holders"]] == ["setup"]
    assert view["stuck_jobs"] == []

    text = cli("partitions", dest, "--stuck-after", "0s").out
    line = next(ln for ln in text.splitlines() if ln.startswith(f"dt={D5}"))
    assert f"STUCK {made.committing.job_id} (committing, replace)" in line
    assert f"stuck: job {made.committing.job_id} is committing" in text
    assert f"zero-rename jobs commit {dest} {made.committing.job_id}" in text
    # A job left in setup is stuck too, with what to do: the one holding d6, and
    # the one holding nothing, beside the sealed one.
    line = next(ln for ln in text.splitlines() if ln.startswith(f"dt={D6}"))
    assert f"STUCK {made.claiming.job_id} (setup, replace)" in line
    assert f"stuck: job {made.claiming.job_id} is in setup" in text
    assert "if the run that set it up is over, abort it (zero-rename jobs abort" in text
    holding_none = next(ln for ln in text.splitlines() if ln.startswith("stuck, holding no"))
    assert set(holding_none.split(": ", 1)[1].split(", ")) == {
        made.sealed.job_id,
        made.running.job_id,
    }
    assert "5 partition(s), 5 file(s)" in text


def test_views_refuse_bad_input_and_show_stored_text_safely(
    cli: Cli, committer: Committer, dest: str, bucket: str
) -> None:
    assert cli("partitions", f"s3://{bucket}/nothing-here").code == ExitCode.NOT_FOUND
    assert cli("jobs", "history", "s3://no-such-bucket-zr/t").code == ExitCode.NOT_FOUND
    for argv in (
        ("jobs", "history", dest, "--limit", "0"),
        ("jobs", "history", dest, "--stuck-after", "soon"),
        ("partitions", "http://example.com/t"),
    ):
        ran = cli(*argv)
        assert ran.code == ExitCode.USAGE and len(ran.err.strip().splitlines()) == 1, argv

    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(committer, job, "00000", {"2024-01-01": b"x"})
    committer.commit_job(job.job_id)
    # Another tool's file, its key holding what a terminal acts on.
    hostile = "dt=\x1b[31mred\u202e"
    committer.store.put_object(committer.dest.bucket, f"{committer.dest.dir}{hostile}/f", b"y")
    aborted = committer.setup_job({"conflict_mode": "append"})
    committer.abort_job(aborted.job_id, reason="\x1b]8;;http://evil\x07click\x1b]8;;\x07")
    for argv in (("jobs", "history", dest), ("partitions", dest)):
        ran = cli(*argv)
        assert ran.code == 0 and "\x1b" not in ran.out and "\u202e" not in ran.out, argv
    assert "\\x1b]8;;http://evil\\x07click" in cli("jobs", "history", dest).out
    assert "dt=\\x1b[31mred\\u202e" in cli("partitions", dest).out
    # --json keeps the text exact.
    parts = cli("partitions", dest, "--json").json()["partitions"]
    assert [p["partition"] for p in parts] == [hostile, "dt=2024-01-01"]
