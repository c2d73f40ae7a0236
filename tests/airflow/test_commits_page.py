"""The Commits page on a real ``airflow api-server``, seen in headless Chromium.

The api-server runs with its own password file (an admin and a viewer) and
JWT secret on a free loopback port. The page must refuse anonymous requests,
and show what the store holds: jobs, their states, counts, pending uploads and
``_SUCCESS``, for the destinations its settings allow only (one bucket of the
module's, see ``page_bucket``); its chart with a time axis and ticks, its
numbers as the command line prints them; and, to the admin only, buttons that
trigger ``manual_abort`` for a stuck or committing job. It reads S3 through a
connection kept in Airflow's database, which a test may change between
requests: the api-server looks it up anew.
"""

from __future__ import annotations

import html
import http.client
import json
import os
import re
import secrets
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx
import pytest

from tests import buckets, table_stub
from tests.airflow.browser import Browser
from tests.airflow.dagruns import sync_dags
from tests.airflow.environment import AIRFLOW_HOME, VENV_BIN
from tests.every_state import D1, D2, D3, D5, D6, age, every_state
from tests.helpers import write_task
from tests.table_jobs import table_job
from zero_rename.core.committer import Committer
from zero_rename.core.data.model import JobRecord
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.steps import StepRunner, failure_reason
from zero_rename.embedded_s3 import EmbeddedS3, free_ports, stop_process_group
from zero_rename.errors import OutputCheckError

pytestmark = pytest.mark.browser


STARTUP_SECONDS = 180


@dataclass
class ApiServer:
    url: str
    token: str  # an admin's
    viewer_token: str  # a viewer's: may read the page, may not trigger a DAG


# The page's connection: in Airflow's database, not the environment, so that a
# test can break it while the api-server runs.
PAGE_CONN = "zr_page"


def set_page_connection(server: EmbeddedS3, **changes: str) -> None:
    """The page's connection to ``server``, with ``changes`` (``password``,
    ``endpoint_url``) laid over it."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        session.query(Connection).filter_by(conn_id=PAGE_CONN).delete()
        extra = {
            "endpoint_url": changes.get("endpoint_url", server.endpoint_url),
            "region_name": "us-east-1",
        }
        session.add(
            Connection(
                conn_id=PAGE_CONN,
                conn_type="aws",
                login=server.access_key,
                password=changes.get("password", server.secret_key),
                extra=json.dumps(extra),
            )
        )


@pytest.fixture(scope="module")
def page_bucket(airflow_env: EmbeddedS3) -> str:
    """The bucket whose ``tables/`` the page may show (``allowed_destination_prefixes``)
    and whose ``configured`` table it lists by default (``destinations``)."""
    return buckets.new_bucket(airflow_env)


@pytest.fixture
def committer(page_bucket: str, store_config: StoreConfig) -> Committer:
    """A table of the test's own under the allowed prefix."""
    return Committer(f"s3://{page_bucket}/tables/{uuid.uuid4().hex[:8]}", store_config)


@pytest.fixture(scope="module")
def api_server(airflow_env: EmbeddedS3, page_bucket: str) -> Iterator[ApiServer]:
    set_page_connection(airflow_env)
    port = free_ports(1)[0]
    passwords = {user: secrets.token_urlsafe(16) for user in ("admin", "viewer")}
    passwords_file = AIRFLOW_HOME / "api-passwords.json"
    passwords_file.write_text(json.dumps(passwords))
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__ZERO_RENAME__AWS_CONN_ID": PAGE_CONN,
        "AIRFLOW__ZERO_RENAME__DESTINATIONS": f"s3://{page_bucket}/configured",
        "AIRFLOW__ZERO_RENAME__ALLOWED_DESTINATION_PREFIXES": f"s3://{page_bucket}/tables/",
    }
    url = f"http://127.0.0.1:{port}"
    with open(AIRFLOW_HOME / "api-server.log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "airflow"),
                "api-server",
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "1",
                "--apps",
                "core",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_healthy(url, proc)
        tokens = {}
        for user, password in passwords.items():
            response = httpx.post(
                f"{url}/auth/token", json={"username": user, "password": password}, timeout=30
            )
            response.raise_for_status()
            tokens[user] = response.json()["access_token"]
        yield ApiServer(url, tokens["admin"], tokens["viewer"])
    finally:
        stop_process_group(proc, timeout=30)


def wait_until_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, (AIRFLOW_HOME / "api-server.log").read_text()[-3000:]
        try:
            if httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"api-server did not answer within {STARTUP_SECONDS} s")


@dataclass
class Jobs:
    committed: JobRecord
    staged: JobRecord
    aborted: JobRecord


@pytest.fixture
def jobs(airflow_env: EmbeddedS3, committer: Committer) -> Jobs:
    options = {"partition_columns": "dt", "conflict_mode": "replace"}
    committed = committer.setup_job(options, origin=ORIGIN)
    for i in range(3):
        write_task(committer, committed, f"{i:05d}", {"2024-07-01": b"c" * 500}, rows=7)
    committer.commit_job(committed.job_id)
    committer.validate_output(committed.job_id)  # the output check after the commit
    staged = committer.setup_job(options)
    manifests = [
        write_task(committer, staged, f"{i:05d}", {"2024-07-02": b"s" * 300}, publish=False, rows=5)
        for i in range(2)
    ]
    committer.save_stage_manifest(
        staged.job_id, [m for m in manifests if m is not None], engine="spark"
    )
    aborted = committer.setup_job(options)
    write_task(committer, aborted, "00000", {"2024-07-03": b"a" * 10})
    committer.abort_job(aborted.job_id, reason="step(s) stage failed (DAG daily, run r1)")
    return Jobs(committed, staged, aborted)


ORIGIN = {
    "airflow_dag_id": "daily_partitioned_write",
    "airflow_run_id": "manual__2024-07-01",
    "airflow_task_id": "setup_job",
}


def page_url(server: ApiServer, committer: Committer, job: str | None = None) -> str:
    query = {"dest": committer.dest.url, **({"job": job} if job else {})}
    return f"{server.url}/zero-rename/commits?{urlencode(query)}"


def test_the_page_requires_airflow_authentication(
    api_server: ApiServer, committer: Committer
) -> None:
    url = page_url(api_server, committer)
    assert httpx.get(url, timeout=60).status_code == 401
    assert httpx.get(
        url, headers={"Authorization": "Bearer not-a-token"}, timeout=60
    ).status_code in (401, 403)
    authorized = httpx.get(url, headers={"Authorization": f"Bearer {api_server.token}"}, timeout=60)
    assert authorized.status_code == 200 and "<h1>Commits</h1>" in authorized.text
    plugins = httpx.get(
        f"{api_server.url}/api/v2/plugins",
        timeout=60,
        headers={"Authorization": f"Bearer {api_server.token}"},
    ).json()
    (plugin,) = [p for p in plugins["plugins"] if p["name"] == "zero_rename"]
    assert plugin["external_views"][0]["href"].endswith("/zero-rename/commits")


def test_the_page_shows_jobs_counts_and_success_in_a_browser(
    api_server: ApiServer, committer: Committer, jobs: Jobs, s3_server: EmbeddedS3, tmp_path: Path
) -> None:
    with Browser() as browser:
        # The UI's session cookie, as the page gets it inside Airflow's UI.
        browser.set_cookie("_token", api_server.token, api_server.url)
        browser.goto(page_url(api_server, committer, jobs.committed.job_id))
        browser.screenshot(tmp_path / "commits.png")
        text = browser.text()
        rows = browser.evaluate("""Object.fromEntries([...document.querySelectorAll('tr.job')]
            .map(r => [r.dataset.jobId, {state: r.dataset.state,
              ...Object.fromEntries([...r.querySelectorAll('[data-field]')]
                 .map(c => [c.dataset.field, c.innerText.trim()]))}]))""")
        success = browser.evaluate("document.getElementById('success-summary').innerText")
        detail = browser.evaluate("document.getElementById('job-detail').innerText")
        source = browser.evaluate("document.documentElement.outerHTML")
        # A destination outside the page's settings: refused, saying which setting allows it.
        browser.goto(f"{api_server.url}/zero-rename/commits?dest=s3://elsewhere/private")
        refused = browser.evaluate("document.getElementById('refused').innerText")
        refused_page = browser.text()

    assert "Commits" in text and committer.dest.url in text
    assert int(rows[jobs.committed.job_id].pop("requests")) > 0  # the job commit's
    assert rows[jobs.committed.job_id] == {
        "state": "committed",
        "tasks": "3",
        "files": "3",
        "bytes": "1.5 KiB",
        "rows": "21",
        "pending": "0",
    }
    assert rows[jobs.staged.job_id] == {
        "state": "setup",
        "tasks": "2",
        "files": "2",
        "bytes": "600 B",
        "rows": "10",
        "pending": "2",
        "requests": "—",
    }
    assert rows[jobs.aborted.job_id]["state"] == "aborted"
    assert rows[jobs.aborted.job_id]["pending"] == "0"
    assert jobs.committed.job_id in success and "3 file(s)" in success and "21 row(s)" in success
    assert "dt=2024-07-01" in success
    assert "commit" in detail and "succeeded" in detail
    assert "Output check" in detail and "valid, 3 file(s) as _SUCCESS lists them" in detail
    for secret in (s3_server.secret_key, api_server.token):
        assert secret not in source
    assert "s3://elsewhere/private is not one of the destinations" in refused
    assert "[zero_rename] allowed_destination_prefixes" in refused
    assert "Cannot read" not in refused_page and "Traceback" not in refused_page


# The page's elements as the browser drew them: the chart's marks, the partition
# rows and their holders, the stuck jobs, the theme and its colours.
PAGE_DOM = """(() => {
  const q = (s, e) => [...(e || document).querySelectorAll(s)];
  const svg = document.querySelector('figure.chart svg.history');
  return {
    role: svg.getAttribute('role'),
    title: svg.querySelector('title').textContent,
    desc: svg.querySelector('desc').textContent,
    labelled: svg.getAttribute('aria-labelledby').split(' ')
      .map(id => document.getElementById(id) ? document.getElementById(id).tagName : null),
    points: Object.fromEntries(q('g.panel', svg).map(g =>
      [g.dataset.measure, q('circle.point', g).map(c => c.dataset.jobId)])),
    pointTitle: svg.querySelector('circle.point title').textContent,
    marks: q('g.mark', svg).map(m => [m.dataset.jobId, m.dataset.kind]),
    abortLines: q('line.abort-line', svg).length,
    numbers: q('details.numbers tbody tr').length,
    partitions: q('tr.partition').map(r => ({
      partition: r.dataset.partition, held: r.dataset.held,
      ...Object.fromEntries(q('[data-field]', r).map(c => [c.dataset.field, c.innerText.trim()])),
      holders: q('.held-by', r).map(h => [h.dataset.jobId, h.className.split(' ')[1]])})),
    stuck: q('#stuck-jobs li').map(li => li.dataset.jobId),
    alertRole: document.getElementById('stuck-jobs').getAttribute('role'),
    theme: document.documentElement.className,
    background: getComputedStyle(document.body).backgroundColor,
    series: getComputedStyle(svg.querySelector('polyline.series')).stroke,
  };
})()"""
WHITE, DARK = "rgb(255, 255, 255)", "rgb(13, 17, 23)"


# The chart's axes and labels, the page's numbers, the destination field: as drawn.
CHART_DOM = """(() => {
  const q = (s, e) => [...(e || document).querySelectorAll(s)];
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
  const svg = document.querySelector('figure.chart svg.history');
  const field = document.querySelector('input[name=dest]');
  const style = getComputedStyle(field);
  const cells = (rows) => rows.map(r => Object.fromEntries(
    q('[data-field]', r).map(c => [c.dataset.field, c.textContent.trim()])));
  return {
    panels: q('g.panel', svg).map(g => ({
      measure: g.dataset.measure,
      title: g.querySelector('text.panel-title').textContent,
      titleBox: box(g.querySelector('text.panel-title')),
      ticks: q('text.tick', g).map(t => t.textContent),
      // The highest and lowest of its drawing: the top tick's line, the lowest label.
      plotTop: Math.min(...q('.y-axis line', g).map(l => box(l).top)),
      lowest: Math.max(...q('text.tick', g).map(t => box(t).bottom)),
    })),
    times: q('g.x-axis text.time', svg).map(t => t.textContent),
    dates: q('g.x-axis text.date', svg).map(t => t.textContent),
    chartWidth: svg.getBoundingClientRect().width,
    pageWidth: document.body.clientWidth,
    jobs: cells(q('tr.job')),
    partitions: cells(q('tr.partition')),
    numbers: cells(q('details.numbers tbody tr')),
    success: document.getElementById('success-summary').innerText,
    field: {value: field.value, fontSize: parseFloat(style.fontSize),
      lineHeight: parseFloat(style.lineHeight),
      content: field.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom)},
  };
})()"""


def check_chart(dom: dict[str, Any]) -> None:
    """Titles clear of the panel above, round ticks on every y-axis, a time axis
    with dates, the page's whole width."""
    panels = dom["panels"]
    assert [p["title"] for p in panels] == [
        "Run seconds, setup to commit",
        "Commit step seconds",
        "Files",
        "Rows",
        "Bytes",
    ]
    for above, panel in zip(panels, panels[1:], strict=False):
        assert above["lowest"] < panel["titleBox"]["top"], (above, panel)
        assert panel["titleBox"]["bottom"] < panel["plotTop"], panel
    assert all(len(p["ticks"]) >= 2 for p in panels), panels
    assert dom["dates"] and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) for d in dom["dates"])
    assert all(re.fullmatch(r"\d{2}:\d{2}(:\d{2})?", t) for t in dom["times"]), dom["times"]
    assert dom["chartWidth"] > 0.95 * dom["pageWidth"]


# Each job row's steps as drawn: class, tooltip, text.
STEPS_DOM = """Object.fromEntries([...document.querySelectorAll('tr.job')].map(r =>
  [r.id.slice(4), [...r.querySelectorAll('span.step')].map(s =>
    [s.className, s.title, s.textContent.replace(/\\s+/g, ' ').trim()])]))"""
STAGE_ERROR = "ValueError: unknown codec 'no-such-codec'"


def failed_stage(page_bucket: str, store_config: StoreConfig) -> tuple[Committer, str]:
    """A job whose engine stage failed with its own error, aborted by the steps after
    it: the record keeps the stage's error, and the abort's reason names that step."""
    c = Committer(f"s3://{page_bucket}/tables/failed_{uuid.uuid4().hex[:6]}", store_config)
    runner = StepRunner(c, "daily_partitioned_write", "manual__2024-06-02")
    job = runner.setup({"partition_columns": "dt", "conflict_mode": "replace"})

    def write() -> None:
        raise ValueError("unknown codec 'no-such-codec'")

    with pytest.raises(ValueError):
        runner.stage(job.job_id, write)
    where = "DAG daily_partitioned_write, run manual__2024-06-02"
    runner.abort_after_failure(failure_reason(["stage"], where, c.job(job.job_id)))
    return c, job.job_id


def check_true_states(made: Any, steps: dict[str, Any], failed: dict[str, Any]) -> None:
    """A rolled-back job's commit step says so; a failed stage shows its own error,
    and the abort after it names that step alone."""
    commit = {s[2].split()[0]: s for s in steps[made.rolled_back.job_id]}["commit"]
    assert "step-rolled_back" in commit[0] and "rolled back" in commit[2], commit
    [(job, rows)] = failed["steps"].items()
    shown = {text.split()[0]: (cls, title) for cls, title, text in rows}
    assert shown["stage"] == ("step step-failed", STAGE_ERROR)
    assert "step-succeeded" in shown["abort"][0]
    assert STAGE_ERROR in failed["detail"]
    where = "DAG daily_partitioned_write, run manual__2024-06-02"
    assert f"step(s) stage failed ({where}): stage: {STAGE_ERROR}" in failed["text"]


def big_numbers(page_bucket: str, store_config: StoreConfig) -> Committer:
    """A table of an underscored name with two jobs of many rows: numbers with
    thousands separators wherever they are shown."""
    big = Committer(f"s3://{page_bucket}/tables/daily_events_{uuid.uuid4().hex[:6]}", store_config)
    for rows, size in ((123_456, 300_000), (98_765, 700_000)):
        job = big.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
        write_task(big, job, "00000", {"2024-06-01": b"n" * size}, rows=rows)
        big.commit_job(job.job_id)
    return big


def test_the_page_draws_the_partitions_and_the_history_chart_light_and_dark(
    api_server: ApiServer,
    committer: Committer,
    page_bucket: str,
    store_config: StoreConfig,
    tmp_path: Path,
) -> None:
    made = every_state(committer)
    # Unchanged for hours: stuck, the job left in setup as well as those past it.
    age(committer, made.committing, made.sealed, made.running)
    big = big_numbers(page_bucket, store_config)
    failed, failed_job = failed_stage(page_bucket, store_config)
    shots = {}
    charts = {}
    states: dict[str, Any] = {}
    with Browser() as browser:
        browser.set_cookie("_token", api_server.token, api_server.url)
        doms = {}
        for scheme in ("light", "dark"):
            browser.prefer_color_scheme(scheme)
            browser.goto(page_url(api_server, committer))
            shots[scheme] = tmp_path / f"commits-{scheme}.png"
            browser.screenshot(shots[scheme])
            browser.screenshot_of(tmp_path / f"history-{scheme}.png", "figure.chart")
            doms[scheme] = browser.evaluate(PAGE_DOM)
            charts[f"every-state-{scheme}"] = browser.evaluate(CHART_DOM)
            states[f"steps-{scheme}"] = browser.evaluate(STEPS_DOM)
            browser.goto(page_url(api_server, failed, failed_job))
            browser.screenshot(tmp_path / f"failed-stage-{scheme}.png")
            states[f"failed-{scheme}"] = {
                "steps": browser.evaluate(STEPS_DOM),
                "detail": browser.evaluate("document.getElementById('job-detail').innerText"),
                "text": browser.text(),
            }
            browser.goto(page_url(api_server, big))
            browser.screenshot_of(tmp_path / f"history-numbers-{scheme}.png", "figure.chart")
            browser.screenshot_of(tmp_path / f"destination-field-{scheme}.png", "form", margin=2)
            charts[f"numbers-{scheme}"] = browser.evaluate(CHART_DOM)
        # Airflow's own theme (its UI keeps the choice) wins over the browser's.
        browser.evaluate("localStorage.setItem('theme', 'light')")
        browser.goto(page_url(api_server, committer))
        chosen = browser.evaluate(PAGE_DOM)
        browser.evaluate("localStorage.removeItem('theme')")

    light, dark = doms["light"], doms["dark"]
    committed = [j.job_id for j in made.committed()]
    measures = ("run_seconds", "seconds", "files", "rows", "bytes")
    assert light["points"] == {m: committed for m in measures}
    assert dict(light["marks"]) == {
        made.aborted.job_id: "aborted",
        made.rolled_back.job_id: "rolled-back",
        made.committing.job_id: "stuck",
        made.sealed.job_id: "stuck",
        made.running.job_id: "stuck",
        made.claiming.job_id: "running",
    }
    assert light["abortLines"] == 2 and light["numbers"] == 9
    assert light["role"] == "img" and light["labelled"] == ["title", "desc"]
    assert light["title"] == f"Job history of {committer.dest.url}"
    assert "9 job(s)" in light["desc"] and "3 committed" in light["desc"]
    assert "1 aborted; 1 rolled back; 3 stuck; 1 running" in light["desc"]
    assert light["pointTitle"].startswith(f"job {made.first.job_id}, committed ")

    rows = {r["partition"]: r for r in light["partitions"]}
    assert list(rows) == [f"dt={D5}", f"dt={D6}", f"dt={D3}", f"dt={D2}", f"dt={D1}"]
    assert rows[f"dt={D5}"]["held"] == "stuck"
    assert rows[f"dt={D5}"]["holders"] == [[made.committing.job_id, "stuck"]]
    assert rows[f"dt={D6}"]["held"] == "claimed"
    assert rows[f"dt={D6}"]["holders"] == [[made.claiming.job_id, "claimed"]]
    d1 = rows[f"dt={D1}"]
    assert (d1["held"], d1["files"], d1["rows"], d1["bytes"], d1["mode"], d1["jobs"]) == (
        "",
        "3",
        "18",
        "180 B",
        "append",
        "2",
    )
    assert d1["job"] == made.append.job_id and rows[f"dt={D3}"]["job"] == "another tool's files"
    stuck = [made.committing.job_id, made.sealed.job_id, made.running.job_id]
    assert sorted(light["stuck"]) == sorted(stuck)
    for scheme in ("light", "dark"):
        check_true_states(made, states[f"steps-{scheme}"], states[f"failed-{scheme}"])
    assert light["alertRole"] == "alert"

    # The same page in both themes, each readable: its own background and series colour.
    assert light["theme"] == dark["theme"] == ""  # no choice of Airflow's: the browser's
    assert (light["background"], dark["background"]) == (WHITE, DARK)
    assert light["series"] != dark["series"]
    assert light["points"] == dark["points"] and light["partitions"] == dark["partitions"]
    assert chosen["theme"] == "light" and chosen["background"] == WHITE
    assert all(p.stat().st_size > 20_000 for p in shots.values())
    assert shots["light"].read_bytes() != shots["dark"].read_bytes()

    for dom in charts.values():
        check_chart(dom)
    numbers = charts["numbers-light"]
    # The command line's format: 123,456 rows, 1.5 KiB, 0.12s; the axes' ticks too.
    ticks = {p["measure"]: p["ticks"] for p in numbers["panels"]}
    assert ticks["rows"] == ["0", "50,000", "100,000", "150,000"]
    assert ticks["files"] == ["0", "1"]
    assert ticks["bytes"] == ["0 B", "200.0 KiB", "400.0 KiB", "600.0 KiB", "800.0 KiB"]
    assert all(re.fullmatch(r"\d+\.\d\ds|\d+\.\ds", t) for t in ticks["seconds"])
    assert [j["rows"] for j in numbers["jobs"]] == ["98,765", "123,456"]
    assert [j["bytes"] for j in numbers["jobs"]] == ["683.6 KiB", "293.0 KiB"]
    assert [n["rows"] for n in numbers["numbers"]] == ["123,456", "98,765"]
    assert all(re.fullmatch(r"\d+\.\d\ds", n["run-seconds"]) for n in numbers["numbers"])
    (partition,) = numbers["partitions"]
    assert (partition["rows"], partition["bytes"]) == ("222,221", "976.6 KiB")
    assert "98,765 row(s)" in numbers["success"]
    # The field shows the destination whole: with the form's default line height a
    # monospace font's underscores fell below the field's box (at 1 pixel a pixel).
    field = numbers["field"]
    assert field["value"] == big.dest.url and "_" in field["value"]
    assert field["lineHeight"] >= 1.4 * field["fontSize"]
    assert field["content"] >= field["lineHeight"] - 1


def test_airflow_ui_shows_the_page_under_browse_in_its_theme(
    api_server: ApiServer, page_bucket: str, tmp_path: Path
) -> None:
    frame = "document.querySelector('iframe')"
    inside = f"{frame} && {frame}.contentDocument && {frame}.contentDocument.body"
    framed = (
        f"[({inside}) ? {frame}.contentDocument.body.innerText : '', "
        f"({inside}) ? {frame}.contentDocument.documentElement.className : '', "
        f"({inside}) ? getComputedStyle({frame}.contentDocument.body).backgroundColor : '', "
        "document.documentElement.className]"
    )
    with Browser() as browser:
        browser.set_cookie("_token", api_server.token, api_server.url)
        # Airflow's UI keeps the user's theme and marks its page with it.
        browser.goto(f"{api_server.url}/")
        browser.evaluate("localStorage.setItem('theme', 'dark')")
        browser.goto(f"{api_server.url}/plugin/commits")
        # The UI renders the external view in a frame once its scripts have run.
        text, theme, background, host = wait_for(browser, framed, lambda v: "Commits" in v[0])
        src = browser.evaluate(f"{frame}.src")
        browser.screenshot(tmp_path / "airflow-ui-dark.png")
        # The theme switched in Airflow's UI: the page follows at once.
        browser.evaluate("document.documentElement.classList.replace('dark', 'light')")
        _, switched, switched_background, _ = wait_for(browser, framed, lambda v: v[1] == "light")
        browser.evaluate("localStorage.removeItem('theme')")
    assert src == f"{api_server.url}/zero-rename/commits"
    # Opened without a destination: the configured one.
    assert "Commits" in text and f"s3://{page_bucket}/configured" in text
    assert "dark" in host.split() and theme == "dark" and background == DARK
    assert switched == "light" and switched_background == WHITE


def wait_for(browser: Browser, expression: str, done: Callable[[Any], bool]) -> Any:
    """The expression's value once ``done`` says so (within a minute)."""
    deadline = time.monotonic() + 60
    value = browser.evaluate(expression)
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.3)
        value = browser.evaluate(expression)
    return value


def test_the_page_links_jobs_to_their_run_and_says_why_one_was_aborted(
    api_server: ApiServer, committer: Committer, jobs: Jobs
) -> None:
    headers = {"Authorization": f"Bearer {api_server.token}"}
    page = httpx.get(
        page_url(api_server, committer, jobs.aborted.job_id), headers=headers, timeout=60
    ).text
    assert "Aborted: step(s) stage failed (DAG daily, run r1)" in page
    run = "/dags/daily_partitioned_write/runs/manual__2024-07-01/tasks/setup_job"
    assert f'href="{run}"' in page  # the committed job, set up by that run's task
    # The engine's stage is a step of the job, between setup and the orchestrator's steps.
    staged = httpx.get(
        page_url(api_server, committer, jobs.staged.job_id), headers=headers, timeout=60
    ).text
    assert re.search(
        r'class="step step-succeeded" title="spark: 2 task\(s\), 2 file\(s\)">'
        r"\s*stage",
        staged,
    )
    # A committed file deleted: the next output check fails, and the page says which.
    success = committer.read_success()
    assert success is not None
    gone = next(iter(committer.committed_files(success))).path
    committer.store.delete_objects(committer.dest.bucket, [committer.dest.dir + gone])
    with pytest.raises(OutputCheckError):
        committer.validate_output(jobs.committed.job_id)
    page = httpx.get(
        page_url(api_server, committer, jobs.committed.job_id), headers=headers, timeout=60
    ).text
    assert 'data-outcome="invalid"' in page and f"missing <code>{gone}</code>" in page
    assert re.search(
        r'class="step step-failed" title="1 problem\(s\)[^"]*">\s*validate_output', page
    )


def test_the_page_shows_a_jobs_table_commit_after_its_commit_step(
    api_server: ApiServer, committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    table_stub.install(monkeypatch, "delta")
    published = table_job(committer, {"2024-07-04": [1, 2]}, table_format="delta")
    replaced = table_job(committer, {"2024-07-04": [3]}, "replace", table_format="delta")
    plain = table_job(committer, {"2024-07-05": [4]})
    headers = {"Authorization": f"Bearer {api_server.token}"}
    page = httpx.get(
        page_url(api_server, committer, replaced.job_id), headers=headers, timeout=60
    ).text
    detail = page[page.index('id="job-detail"') :]
    assert re.search(r'id="table-commit" data-format="delta" data-id="1">', detail)
    assert f"delta table <code>{committer.dest.url}</code>, <strong>version 1</strong>" in detail
    # Each published job's row names its version; a job without a format, none.
    rows = {m[1]: m[2] for m in re.finditer(r'<tr id="job-([0-9a-f-]+)"(.*?)</tr>', page, re.S)}
    assert "delta version 0" in rows[published.job_id]
    assert "delta version 1" in rows[replaced.job_id]
    assert "table-commit" not in rows[plain.job_id]
    # publish_table comes after the commit step, with the commit as its detail.
    steps = re.findall(r'class="step step-\w+" title="([^"]*)">\s*(\w+)', rows[replaced.job_id])
    names = [name for _, name in steps]
    assert names.index("publish_table") == names.index("commit") + 1
    assert (f"delta {committer.dest.url}: 1", "publish_table") in steps


def test_the_page_shows_each_job_as_its_own_record_says(
    api_server: ApiServer, committer: Committer
) -> None:
    """A backup of a record taken before its commit, under ``jobs/zz-backup/`` and
    under another job's key: the page shows the job committed, as Committer.job."""
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    record_key = committer.dest.job(job.job_id).record_key
    found = committer.store.get_object(committer.dest.bucket, record_key)
    assert found is not None
    write_task(committer, job, "00000", {"2024-07-06": b"c" * 50})
    committer.commit_job(job.job_id)
    other = str(uuid.uuid4())
    for key in (
        committer.dest.jobs_dir + "zz-backup/job.json",
        committer.dest.job(other).record_key,
    ):
        committer.store.put_object(committer.dest.bucket, key, found[0])
    page = get_page(api_server, committer.dest.url)
    assert page.status_code == 200
    states = dict(re.findall(r'data-job-id="([0-9a-f-]+)" data-state="(\w+)"', page.text))
    assert states == {job.job_id: committer.job(job.job_id).state} == {job.job_id: "committed"}
    assert other not in page.text


def get_page(server: ApiServer, *dests: str) -> httpx.Response:
    return httpx.get(
        f"{server.url}/zero-rename/commits",
        params=[("dest", d) for d in dests],
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=60,
    )


def raw_get(server: ApiServer, target: str) -> tuple[int, str]:
    """A GET of any length (httpx refuses a query over 64 KiB): status and text."""
    url = urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
    try:
        conn.request("GET", target, headers={"Authorization": f"Bearer {server.token}"})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def test_the_page_refuses_destinations_its_settings_do_not_allow(
    api_server: ApiServer,
    committer: Committer,
    page_bucket: str,
    bucket: str,
    store_config: StoreConfig,
    s3_server: EmbeddedS3,
) -> None:
    # A table the page's connection can read, outside the page's settings.
    other = Committer(f"s3://{bucket}/private", store_config)
    job = other.setup_job({"conflict_mode": "append"})
    write_task(other, job, "00000", [b"private rows"])
    other.commit_job(job.job_id)

    refused = get_page(api_server, other.dest.url)
    assert refused.status_code == 403
    assert "[zero_rename] allowed_destination_prefixes" in refused.text
    assert job.job_id not in refused.text and "_SUCCESS" not in refused.text
    # Prefixes match whole path elements; one refused destination refuses the request.
    assert get_page(api_server, f"s3://{page_bucket}/tables_private/t").status_code == 403
    assert get_page(api_server, committer.dest.url, other.dest.url).status_code == 403
    long = get_page(api_server, f"s3://{bucket}/" + "x" * 1000)
    assert long.status_code == 403 and "x" * 400 not in long.text
    # The configured destination, however spelt, and one under the allowed prefix.
    shown = get_page(api_server, f"s3a://{page_bucket}/configured/", committer.dest.url)
    assert shown.status_code == 200 and shown.text.count('class="destination"') == 2

    # A malformed destination: 400, a short message, never the credential it carries.
    for text in (
        "http://example.com/t",
        f"s3://AKIAEXAMPLE:{s3_server.secret_key}@{bucket}/t",
        f"s3://{bucket}/" + "x" * 5000 + "?versionId=1",
    ):
        bad = get_page(api_server, text)
        assert bad.status_code == 400 and "Malformed destination" in bad.text
        assert s3_server.secret_key not in bad.text and "x" * 400 not in bad.text
        assert "Traceback" not in bad.text


# What a refused destination of a megabyte, and a health check beside it, may take:
# far more than either takes, far less than the minutes one took when masking its
# message was quadratic (a 65,000-character one held the api-server for 181 s).
ANSWER_SECONDS = 15.0


def test_a_megabyte_destination_gets_400_at_once_while_the_server_answers_others(
    api_server: ApiServer, page_bucket: str
) -> None:
    """Under the allowed prefix, so that only its length refuses it. Four clients
    send such destinations meanwhile; the api-server keeps answering its health
    check throughout. A megabyte of URL is refused by the api-server's HTTP parser
    itself (uvicorn takes a request line and headers of up to 80 KiB, and answers
    "Invalid HTTP request received.", a 400 too); 65,000 characters reach the
    page, which refuses them before asking S3 anything."""
    under = f"s3://{page_bucket}/tables/"
    huge = [under + "x" * 1_000_000, under + "x" * 65_000, under + "a:b." * 10_000]
    answers: list[tuple[int, int, float, str]] = []  # (characters sent, status, seconds, text)

    def send() -> None:
        for dest in huge:
            started = time.monotonic()
            status, text = raw_get(api_server, "/zero-rename/commits?" + urlencode({"dest": dest}))
            answers.append((len(quote(dest)), status, time.monotonic() - started, text))

    senders = [threading.Thread(target=send) for _ in range(4)]
    for sender in senders:
        sender.start()
    health: list[float] = []
    while any(s.is_alive() for s in senders) or not health:
        started = time.monotonic()
        answer = httpx.get(f"{api_server.url}/api/v2/monitor/health", timeout=60)
        assert answer.status_code == 200
        health.append(time.monotonic() - started)
    for sender in senders:
        sender.join()
    assert len(answers) == 4 * len(huge)
    for length, status, seconds, text in answers:
        assert status == 400 and seconds < ANSWER_SECONDS and len(text) < 20_000
        if length < 80_000:
            assert "Malformed destination" in text and "longer than any S3 URL" in text
            assert "x" * 400 not in text
    assert max(health) < ANSWER_SECONDS, health


def test_no_error_on_the_page_shows_the_endpoint(
    api_server: ApiServer, airflow_env: EmbeddedS3, page_bucket: str
) -> None:
    """Unreachable S3, refused credentials, a malformed connection: the configured
    destination shows why it cannot be read, never where S3 is."""
    closed = f"127.0.0.1:{free_ports(1)[0]}"
    cases = {
        "unreachable": {"endpoint_url": f"http://{closed}"},
        "refused credentials": {"password": "not-the-secret-key"},
        "malformed endpoint": {"endpoint_url": f"htp:/{closed}/::"},
    }
    hidden = (airflow_env.endpoint_url.split("://")[1], closed, airflow_env.secret_key)
    errors = {}
    try:
        for case, changes in cases.items():
            set_page_connection(airflow_env, **changes)
            page = get_page(api_server)
            assert page.status_code == 200, case
            assert f"s3://{page_bucket}/configured" in page.text, case
            (error,) = re.findall(r'class="box error">([^<]*)<', page.text)
            errors[case] = html.unescape(error)
            assert not [h for h in hidden if h in page.text], (case, error)
            assert "Traceback" not in page.text, case
    finally:
        set_page_connection(airflow_env)
    assert "StoreError" in errors["unreachable"]
    assert "refused the credentials" in errors["refused credentials"]
    assert "cannot use connection 'zr_page'" in errors["malformed endpoint"]


@pytest.fixture(scope="module")
def abort_dag(api_server: ApiServer) -> str:
    """manual_abort in Airflow's database, as the DAG processor would leave it (paused:
    no scheduler runs here, so a run it gets stays queued, for the test to read)."""
    sync_dags("manual_abort.py")
    return "manual_abort"


def abort_runs(server: ApiServer) -> list[dict[str, Any]]:
    """The runs of manual_abort, through Airflow's REST API."""
    response = httpx.get(
        f"{server.url}/api/v2/dags/manual_abort/dagRuns",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=60,
    )
    response.raise_for_status()
    return list(response.json()["dag_runs"])


# The page's actions and what a confirmation says.
ACTIONS_DOM = """(() => ({
  offers: [...document.querySelectorAll('tr.job a.action')]
    .map(a => [a.dataset.jobId, a.dataset.action]),
  stuckOffers: [...document.querySelectorAll('#stuck-jobs a.action')]
    .map(a => [a.dataset.jobId, a.dataset.action]),
  confirm: document.getElementById('confirm') ? {
    job: document.getElementById('confirm').dataset.jobId,
    action: document.getElementById('confirm').dataset.action,
    params: JSON.parse(document.getElementById('confirm-params').textContent),
    steps: [...document.querySelectorAll('#confirm-steps li')].map(li => li.innerText),
    text: document.getElementById('confirm').innerText,
  } : null,
  refused: (document.getElementById('confirm-refused') || {}).innerText || '',
  triggered: (document.getElementById('triggered') || {}).innerText || '',
}))()"""


def test_a_stuck_job_is_aborted_from_the_page_by_a_run_of_manual_abort(
    api_server: ApiServer, committer: Committer, abort_dag: str, tmp_path: Path
) -> None:
    """The buttons fit each job's state; the confirmation says what the run will do
    and its params; confirming creates the run through Airflow, as the user. A viewer
    gets no button, and 403 from the endpoint; a request from another origin 403."""
    made = every_state(committer)
    age(committer, made.committing, made.sealed)  # stuck
    sealed, committing = made.sealed.job_id, made.committing.job_id
    dest = committer.dest.url
    with Browser() as browser:
        browser.set_cookie("_token", api_server.token, api_server.url)
        browser.goto(page_url(api_server, committer))
        offered = browser.evaluate(ACTIONS_DOM)
        # The sealed job's button, then the confirmation, in both themes.
        browser.click(f'tr.job[data-job-id="{sealed}"] a.action[data-action="abort"]')
        confirmed = browser.evaluate(ACTIONS_DOM)
        confirm_url = browser.evaluate("location.href.split('#')[0]")
        for scheme in ("light", "dark"):  # the page follows the preference as it changes
            browser.prefer_color_scheme(scheme)
            browser.screenshot_of(tmp_path / f"confirm-abort-{scheme}.png", "#confirm")
        browser.click("#confirm-submit")
        after = browser.evaluate(ACTIONS_DOM)
        browser.screenshot(tmp_path / "triggered-dark.png")
        # The committing job: roll back, by force too; its confirmation says so.
        browser.goto(page_url(api_server, committer, committing) + "&action=force_roll_back")
        forced = browser.evaluate(ACTIONS_DOM)
        # The run's task in Airflow's UI, once it recorded its link: a "Commits" tab
        # beside Logs and Details, showing the page at the task's job.
        (run,) = abort_runs(api_server)
        record_commits_link(run["dag_run_id"], page_url(api_server, committer, sealed))
        task = f"/dags/manual_abort/runs/{quote(run['dag_run_id'], safe='')}/tasks/abort_job"
        browser.goto(api_server.url + task)
        tab_names = wait_for(browser, TABS, lambda names: "Commits" in names)
        browser.evaluate(CLICK_TAB)
        framed = wait_for(browser, FRAMED_JOB, lambda job: job == sealed)
        browser.screenshot(tmp_path / "task-tab-commits.png")
        # A viewer: the page, without a button; a confirmation asked for is refused.
        browser.set_cookie("_token", api_server.viewer_token, api_server.url)
        browser.goto(confirm_url)
        viewer = browser.evaluate(ACTIONS_DOM)

    assert sorted(offered["offers"]) == sorted(
        [[sealed, "abort"], [committing, "roll_back"], [committing, "force_roll_back"]]
    )
    assert sorted(offered["stuckOffers"]) == sorted(offered["offers"])
    confirm = confirmed["confirm"]
    assert (confirm["job"], confirm["action"]) == (sealed, "abort")
    assert confirm["params"] == {
        "destination": dest,
        "job_id": sealed,
        "roll_back": False,
        "force": False,
    }
    assert "manual_abort" in confirm["text"] and "is paused" in confirm["text"]
    assert any("compare-and-swap" in s for s in confirm["steps"])
    assert any("pending uploads (1 now)" in s for s in confirm["steps"])

    assert "Commits" in tab_names
    assert framed == sealed  # the tab shows the page at the task's job
    assert run["conf"] == confirm["params"]
    assert run["triggered_by"] == "ui" and run["triggering_user_name"] == "admin"
    assert run["dag_run_id"] in after["triggered"] and "paused" in after["triggered"]

    assert forced["confirm"]["params"] == {
        "destination": dest,
        "job_id": committing,
        "roll_back": True,
        "force": True,
    }
    assert any("its output is given up" in s for s in forced["confirm"]["steps"])
    assert any("releases its claim (1 partition(s))" in s for s in forced["confirm"]["steps"])

    assert viewer["offers"] == [] and viewer["confirm"] is None
    assert "may not trigger manual_abort" in viewer["refused"]
    assert refused_actions(api_server, committer, made.first.job_id) == 1
    assert_task_tab(api_server, run["dag_run_id"], page_url(api_server, committer, sealed))


# The task instance's tabs in Airflow's UI (the page's words, text node by text
# node), the "Commits" one clicked, and the job the page in its frame shows.
TEXTS = """(() => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = []; while (w.nextNode()) found.push(w.currentNode); return found; })()"""
TABS = f"{TEXTS}.map(t => t.nodeValue.trim()).filter(t => t)"
CLICK_TAB = f"""(() => {{ const t = {TEXTS}.filter(t => t.nodeValue.trim() === 'Commits').pop();
  const e = t.parentElement; (e.closest('a,button,[role=tab]') || e).click(); }})()"""
FRAMED_JOB = """(() => { const f = document.querySelector('iframe');
  const d = f && f.contentDocument && f.contentDocument.querySelector('#job-detail code');
  return d ? d.textContent : null; })()"""


def record_commits_link(run_id: str, link: str) -> None:
    """The run's abort_job task's "Commits" link, as the task records it when it
    finishes (a real run's, tests/airflow/test_daily_dag.py reads)."""
    from airflow.models.xcom import XComModel

    XComModel.set(
        "_link_CommitsLink",
        urlsplit(link).path + "?" + urlsplit(link).query,
        dag_id="manual_abort",
        task_id="abort_job",
        run_id=run_id,
    )


def assert_task_tab(server: ApiServer, run_id: str, link: str) -> None:
    """The tab's address answers with the page at the task's job (its "Commits"
    link), or says the task has none."""
    plugins = httpx.get(
        f"{server.url}/api/v2/plugins",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=60,
    ).json()
    (plugin,) = [p for p in plugins["plugins"] if p["name"] == "zero_rename"]
    (tab,) = [v for v in plugin["external_views"] if v["destination"] == "task_instance"]
    # As Airflow's UI fills it in; an unmapped task leaves {MAP_INDEX} as it is.
    fill = {
        "{DAG_ID}": "manual_abort",
        "{RUN_ID}": quote(run_id, safe=""),
        "{TASK_ID}": "abort_job",
    }
    url = tab["href"]
    for placeholder, value in fill.items():
        url = url.replace(placeholder, value)
    headers = {"Authorization": f"Bearer {server.token}"}
    finished = httpx.get(server.url + url, headers=headers, timeout=60)
    assert finished.status_code == 303 and finished.headers["location"] == link.split(server.url)[1]
    unfinished = httpx.get(
        server.url + url.replace("abort_job", "cleanup_job"), headers=headers, timeout=60
    )
    assert unfinished.status_code == 200 and "has no zero-rename job" in unfinished.text
    viewer = httpx.get(
        server.url + url.replace("manual_abort", "another_dag"),
        headers={"Authorization": f"Bearer {server.viewer_token}"},
        timeout=60,
    )
    assert viewer.status_code == 200 and "has no zero-rename job" in viewer.text


def refused_actions(server: ApiServer, committer: Committer, committed: str) -> int:
    """Requests to act the endpoint refuses: without the permission, from another
    origin, for a job whose state offers nothing. The runs of manual_abort after them."""
    actions = f"{server.url}/zero-rename/actions"
    form = {"dest": committer.dest.url, "job": committed, "action": "abort"}
    as_viewer = httpx.post(
        actions, data=form, headers={"Authorization": f"Bearer {server.viewer_token}"}, timeout=60
    )
    assert as_viewer.status_code == 403
    # The UI's cookie, sent by a page of another origin (a form there, say).
    for headers in ({"Origin": "http://elsewhere.example"}, {"Sec-Fetch-Site": "cross-site"}, {}):
        cross = httpx.post(
            actions, data=form, cookies={"_token": server.token}, headers=headers, timeout=60
        )
        assert cross.status_code == 403 and "did not come from this page" in cross.text
    done = httpx.post(
        actions, data=form, headers={"Authorization": f"Bearer {server.token}"}, timeout=60
    )
    assert done.status_code == 409 and "is committed: nothing to abort" in done.text
    malformed = httpx.post(
        actions,
        data={**form, "job": "not-a-job"},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=60,
    )
    assert malformed.status_code == 400 and "Traceback" not in malformed.text
    return len(abort_runs(server))
