"""The job-commit benchmark's machinery on a few files: complete, consistent results.

No timing is asserted: only that every method committed every file and sent
the requests its design implies.
"""

from __future__ import annotations

import argparse
import logging
import uuid
from pathlib import Path

import pytest

from bench import commit_bench, commit_report, latency_bench, page, worker_imports
from bench.commit_bench import METHODS, command_line, parse_args, run_benchmark
from bench.commit_results import TABLE_METHODS, BenchConfig, Run, summarize
from tests.s3proxy import proxy_for
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.s3

FILES = 20


# The benchmark's run of every method (about 20 s on two cores, a method's child
# process each): the tests reading it are under make test-extended (marker
# extended); the latency benchmark's run, a tenth of it, and the checks of the
# page's sections under make test.
@pytest.fixture(scope="module")
def bench_runs(s3_server: EmbeddedS3) -> tuple[BenchConfig, list[Run]]:
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    s3_server.create_bucket(bucket)
    cfg = BenchConfig(s3_server.endpoint_url, bucket, threads=8, files_per_task=5)
    # committer@before commits with a checkout's package in a child: this one's.
    commit_bench.BEFORE["tree"] = Path(__file__).resolve().parents[1]
    # The table formats' commits in this process: a spawned child each would add
    # seconds of start-up and test nothing more here (their memory is not checked).
    commit_bench.IN_PROCESS.update(TABLE_METHODS)
    try:
        return cfg, run_benchmark(
            cfg, [FILES], [1], tuple(METHODS), scale_counts=[FILES], scale_file_size=0
        )
    finally:
        commit_bench.BEFORE.clear()
        commit_bench.IN_PROCESS.clear()


def _run(runs: list[Run], method: str) -> Run:
    [run] = [r for r in runs if r.method == method]
    return run


@pytest.mark.extended
def test_every_method_commits_every_file(bench_runs: tuple[BenchConfig, list[Run]]) -> None:
    _, runs = bench_runs
    scale = ["committer-scale", "committer-scale@before"]  # --before: the scale run's too
    assert sorted(r.method for r in runs) == sorted([*METHODS, *scale])
    for run in runs:
        assert run.files == FILES
        assert run.committed == FILES, run.method
        assert run.leftover == 0, run.method
        assert run.seconds > 0


@pytest.mark.extended
def test_request_counts_match_each_method(bench_runs: tuple[BenchConfig, list[Run]]) -> None:
    _, runs = bench_runs
    floor = _run(runs, "floor")
    assert floor.requests == {"CompleteMultipartUpload": FILES}
    assert floor.requests_per_file == 1

    verified = _run(runs, "committer")
    assert verified.requests["CompleteMultipartUpload"] == FILES
    # Uploads are confirmed pending by listing them, not one ListParts each.
    assert "ListParts" not in verified.requests
    assert verified.requests["ListMultipartUploads"] >= 1
    # The same commit through another checkout's package (--before): the same requests.
    assert _run(runs, "committer@before").requests == verified.requests
    unverified = _run(runs, "committer-noverify")
    assert unverified.requests["CompleteMultipartUpload"] == FILES
    assert "ListParts" not in unverified.requests
    assert verified.requests_per_file > unverified.requests_per_file > 1
    # The whole protocol: create, upload part and complete per file; manifest PUT,
    # fence read and manifest GET per task (5 files each here); a fixed few per job
    # (store probe, record, claims, plan, journal, _SUCCESS, cleanup).
    tasks = FILES // 5
    assert verified.protocol_requests_per_file is not None
    whole = verified.write_requests + verified.total_requests
    assert 3 * FILES < whole <= 3 * FILES + 3 * tasks + 50, (
        verified.write_requests,
        verified.requests,
    )

    # The scale run's files are written by the cheap preparation, which sends no
    # fence reads: it reports no whole-protocol count.
    assert _run(runs, "committer-scale").protocol_requests_per_file is None

    per_file = _run(runs, "copy-delete")
    assert per_file.requests["CopyObject"] == per_file.requests["DeleteObject"] == FILES
    assert per_file.requests_per_file >= 2
    bulk = _run(runs, "copy-bulk")
    assert bulk.requests["CopyObject"] == FILES
    assert bulk.requests["DeleteObjects"] == 1
    assert bulk.requests_per_file > 1


@pytest.mark.extended
def test_committer_memory_is_its_own_process(bench_runs: tuple[BenchConfig, list[Run]]) -> None:
    _, runs = bench_runs
    for method in ("committer", "committer-noverify", "committer-scale"):
        run = _run(runs, method)
        # A spawned interpreter with boto3 loaded, not the test process's gigabyte.
        assert 20 * 2**20 < run.peak_rss < 200 * 2**20, (method, run.peak_rss)
    assert _run(runs, "floor").peak_rss == 0


@pytest.mark.extended
def test_table_format_methods_publish_once_and_count_the_formats_requests(
    bench_runs: tuple[BenchConfig, list[Run]],
) -> None:
    """Counted at the wire: the formats' own requests (pyarrow, object_store) are in
    their totals, and publishing costs requests per commit, not per file."""
    _, runs = bench_runs
    plain = _run(runs, "committer")
    for method in TABLE_METHODS:
        run = _run(runs, method)
        # Every file completed once; the formats' metadata goes as single PUTs.
        completes = run.requests["CompleteMultipartUpload"]
        assert FILES <= completes <= FILES + 6, (method, run.requests)
        added = run.total_requests - plain.total_requests
        assert 0 < added < 60, (method, run.requests, plain.requests)
        # Their botocore steps are not all of it where the format writes through its
        # own client (PyIceberg through pyarrow); a Delta append is the store's.
        stepped = sum(s.requests for s in run.steps)
        assert (
            stepped < run.total_requests
            if method == "committer-iceberg"
            else stepped <= run.total_requests
        ), method
    cfg, _ = bench_runs
    args = parse_args(["--files", str(FILES), "--methods", ",".join(TABLE_METHODS), "--wire"])
    body = commit_report.table_section(summarize(runs), cfg, args, command_line(args))
    assert body.startswith(commit_report.TABLE_HEADER + "\n")
    assert (
        "--wire" in body and f"| {FILES} | iceberg | +" in body and f"| {FILES} | delta | +" in body
    )


@pytest.mark.extended
def test_steps_account_for_every_request(bench_runs: tuple[BenchConfig, list[Run]]) -> None:
    _, runs = bench_runs
    for run in runs:
        if run.method in TABLE_METHODS:
            continue  # counted at the wire, stepped by botocore's hooks only
        assert sum(s.requests for s in run.steps) == run.total_requests, run.method
        starts = [s.start for s in run.steps]
        assert starts == sorted(starts)


@pytest.mark.extended
def test_summary_and_section(bench_runs: tuple[BenchConfig, list[Run]], tmp_path: Path) -> None:
    cfg, runs = bench_runs
    rows = summarize(runs)
    assert {r.method: r.ratio for r in rows}["floor"] == 1.0
    args: argparse.Namespace = parse_args(
        ["--files", str(FILES), "--threads", "8", "--files-per-task", "5"]
    )
    body = commit_report.section(rows, cfg, args, "python -m bench.commit_bench --files 20")
    assert body.startswith(commit_report.HEADER + "\n")
    result_lines = [line for line in body.splitlines() if line.startswith(f"| {FILES} |")]
    assert len(result_lines) == len(METHODS) + 2  # and the committer at scale, both trees
    assert all(line.endswith(f"| {FILES} |") for line in result_lines)

    path = tmp_path / "benchmarks.md"
    path.write_text("# Benchmarks\n\n## PySpark write\n\nspark numbers\n")
    page.write_section(path, commit_report.HEADER, body)
    page.write_section(
        path, commit_report.HEADER, body.replace("What it measures", "What it now measures")
    )
    text = path.read_text()
    assert text.startswith("# Benchmarks\n\n## PySpark write\n\nspark numbers\n\n## Job commit\n")
    assert text.count(commit_report.HEADER) == 1
    assert "What it now measures" in text and "What it measures" not in text

    # A subsection written by hand outlives the next run; the generated ones are not doubled.
    path.write_text(text.rstrip() + "\n\n### Earlier runs\n\nby hand\n")
    page.write_section(path, commit_report.HEADER, body, commit_report.GENERATED)
    text = path.read_text()
    assert text.endswith(
        "### Reading\n\n" + commit_report.reading(rows, cfg) + "\n\n### Earlier runs\n\nby hand\n"
    )
    assert text.count("### Results") == 1 and text.count("### Earlier runs") == 1


def test_section_replaced_in_place() -> None:
    text = "# Benchmarks\n\n## Job commit\n\nold\n\n## PySpark write\n\nspark\n"
    assert page.replace_section(text, "## Job commit", "## Job commit\n\nnew\n") == (
        "# Benchmarks\n\n## Job commit\n\nnew\n\n## PySpark write\n\nspark\n"
    )
    # The last section, up to the end of the page; the other benchmark's untouched.
    assert page.replace_section(text, "## PySpark write", "## PySpark write\n\nnew\n") == (
        "# Benchmarks\n\n## Job commit\n\nold\n\n## PySpark write\n\nnew\n"
    )
    assert page.replace_section("", "## Job commit", "## Job commit\n\nnew\n") == (
        "# Benchmarks\n\n## Job commit\n\nnew\n"
    )


def test_bench_modules_import_one_way() -> None:
    """The report and the benchmark share their values through a third module:
    neither imports the other's importer, and the package never imports bench."""
    import ast

    root = Path(__file__).resolve().parent.parent

    def imported(path: Path) -> set[str]:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        return names

    assert not {"bench.commit_bench"} & imported(root / "bench" / "commit_report.py")
    assert not {
        n
        for path in (root / "plugin").rglob("*.py")
        for n in imported(path)
        if n.split(".")[0] in ("bench", "demo")
    }


def test_latency_bench_commits_behind_the_delay_and_counts_rounds(
    s3_server: EmbeddedS3, tmp_path: Path
) -> None:
    """The latency benchmark's machinery on 10 files, with this checkout as its own
    baseline: every file committed by each method, and the rounds read from arrivals."""
    assert latency_bench.rounds([], 0.02) == 0
    # two requests side by side, then one that waited, then two more side by side
    assert latency_bench.rounds([0.0, 0.002, 0.025, 0.05, 0.051], 0.02) == 3
    # a client held up 15 ms between two requests it sends together adds no round
    assert latency_bench.rounds([0.0, 0.015, 0.04], 0.02) == 2
    bucket = f"latency-{uuid.uuid4().hex[:8]}"
    s3_server.create_bucket(bucket)
    cfg = BenchConfig(s3_server.endpoint_url, bucket, threads=8, files_per_task=5)
    here = Path(__file__).resolve().parents[1]
    with proxy_for(s3_server) as proxy:
        timed = latency_bench.run(
            cfg, proxy, 0.005, [10], [1], here, logging.getLogger("bench.latency")
        )
    assert sorted(t.method for t in timed) == ["baseline", "committer", "completes"]
    assert all(t.committed == 10 for t in timed)
    assert [t.requests for t in timed if t.method == "completes"] == [10]
    [row] = latency_bench.summarize(timed)
    body = latency_bench.section([row], 0.005, "python -m bench.latency_bench", (1.0, 1.0), "x")
    assert body.startswith(latency_bench.HEADER + "\n") and "| 10 | 1 |" in body


@pytest.mark.extended
def test_the_worker_import_benchmark_times_each_case_in_a_fresh_interpreter() -> None:
    tree = Path(__file__).resolve().parents[1]
    seconds = worker_imports.measure({"this tree": tree}, rounds=1)
    assert sorted(seconds) == [("read", "this tree"), ("task", "this tree")]
    assert all(len(v) == 1 and 0 < v[0] < 60 for v in seconds.values())
    assert "| task | this tree |" in worker_imports.table(seconds)
