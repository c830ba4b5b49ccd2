"""deploy/prometheus-rules.yml: `promtool test rules` on tests/prometheus/rules.test.yml, and every series the rules
and their test read is one the API really exports, names, labels and label values alike (scraped from the API's
/metrics on the session's database), so a renamed gauge fails here rather than in silence in production."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text as sql

from lifecycle.db.engine import make_engine
from lifecycle.deletion.due import DueStage
from lifecycle.stuck import RunKind
from tests.conftest import ADMIN_HEADERS

RULES = "deploy/prometheus-rules.yml"
RULES_TEST = "tests/prometheus/rules.test.yml"
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"instance", "job"}
_SERIES = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>.*)\}$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def test_promtool_passes_the_rules_tests(project_root: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is missing: `make promtool` installs Debian's prometheus package"
    result = subprocess.run([promtool, "test", "rules", RULES_TEST], cwd=project_root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _exported(text: str) -> dict[str, list[dict[str, str]]]:
    """Each lifecycle_ gauge's samples' labels."""
    return {
        family.name: [sample.labels for sample in family.samples]
        for family in text_string_to_metric_families(text)
        if family.name.startswith("lifecycle_")
    }


async def test_every_series_the_rules_read_is_exported(api: httpx.AsyncClient, project_root: Path) -> None:
    answer = await api.get("/metrics", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    exported = _exported(answer.text)
    rules = yaml.safe_load((project_root / RULES).read_text())
    read_by_rules = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"\blifecycle_\w+", rule["expr"])
    }
    assert len(read_by_rules) == 5, read_by_rules
    assert read_by_rules <= exported.keys(), read_by_rules - exported.keys()

    tested = yaml.safe_load((project_root / RULES_TEST).read_text())
    input_series = [series["series"] for case in tested["tests"] for series in case["input_series"]]
    assert {_SERIES.match(series)["name"] for series in input_series} == read_by_rules  # type: ignore[index]
    for series in input_series:
        match = _SERIES.match(series)
        assert match is not None, series
        labels = dict(_LABEL.findall(match["labels"]))
        own = {name: value for name, value in labels.items() if name not in TARGET_LABELS}
        samples = exported[match["name"]]
        # A free label (a service's name) has to exist on some sample; a fixed one (a kind, a stage) with this value.
        if "service" in own:
            continue
        assert own in samples, f"{series}: the API exports {samples}"


async def test_the_gauges_cover_every_kind_and_stage(api: httpx.AsyncClient) -> None:
    exported = _exported((await api.get("/metrics", headers=ADMIN_HEADERS)).text)
    assert sorted(labels["kind"] for labels in exported["lifecycle_stuck_runs"]) == sorted(RunKind)
    assert sorted(labels["stage"] for labels in exported["lifecycle_erasures_due"]) == sorted(DueStage)


async def test_a_stuck_run_and_a_poison_pill_show_on_the_gauges(api: httpx.AsyncClient, database_url: str) -> None:
    """Rows as the code leaves them: an export writing for three hours (STUCK_AFTER_ACCOUNT_EXPORT is two), and a
    deletion at a poison pill."""

    def value(exported: str, name: str, **labels: str) -> float:
        families = text_string_to_metric_families(exported)
        samples = [sample for family in families for sample in family.samples if sample.name == name]
        return next(sample.value for sample in samples if labels.items() <= sample.labels.items())

    async def scrape() -> str:
        answer = await api.get("/metrics", headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        return answer.text

    before = await scrape()
    account = uuid.uuid4()
    export = f"account-export-{account}-1"
    poisoned = f"bot-deletion-{uuid.uuid4()}"
    engine = make_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sql(
                    "INSERT INTO account_exports (id, account_id, sequence, workflow_id, status, requested_at)"
                    " VALUES (:id, :account, 1, :w, 'writing', now() - interval '3 hours')"
                ),
                {"id": uuid.uuid4(), "account": account, "w": export},
            )
            await conn.execute(
                sql(
                    "INSERT INTO deletion_requests (workflow_id, kind, account_id, status)"
                    " VALUES (:w, 'bot', :account, 'waiting_for_operator')"
                ),
                {"w": poisoned, "account": account},
            )
        after = await scrape()
        stuck = "lifecycle_stuck_runs"
        assert value(after, stuck, kind="account_export") == value(before, stuck, kind="account_export") + 1
        pills = "lifecycle_deletions_waiting_for_operator"
        assert value(after, pills) == value(before, pills) + 1
    finally:
        async with engine.begin() as conn:
            await conn.execute(sql("DELETE FROM account_exports WHERE workflow_id = :w"), {"w": export})
            await conn.execute(sql("DELETE FROM deletion_requests WHERE workflow_id = :w"), {"w": poisoned})
        await engine.dispose()
