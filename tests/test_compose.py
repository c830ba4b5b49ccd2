"""docker-compose.yml, checked without a Docker engine: the compose-spec parser plus our own rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_spec import PyCompose

from lifecycle import search_attributes

ONE_SHOT_JOBS = {"temporal-schema", "temporal-setup", "migrate"}


@pytest.fixture(scope="module")
def compose(project_root: Path) -> dict[str, Any]:
    # PyYAML resolves anchors and `<<` merges as Compose does; the validator then sees the final document.
    loaded: dict[str, Any] = yaml.safe_load((project_root / "docker-compose.yml").read_text())
    PyCompose.from_json(json.dumps(loaded)).to_spec()  # raises on anything the Compose specification rejects
    return loaded


def test_every_dependency_exists_and_waits_on_health_or_completion(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, rule in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            condition = rule["condition"]
            assert condition in {"service_healthy", "service_completed_successfully"}, (name, dependency)
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            else:
                assert dependency in ONE_SHOT_JOBS, f"{dependency} is not a one-shot job"


def test_one_shot_jobs_do_not_restart(compose: dict[str, Any]) -> None:
    for job in ONE_SHOT_JOBS:
        assert compose["services"][job]["restart"] == "no"


def test_the_required_services_are_there(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["postgresql"]["image"] == "postgres:16"
    assert services["temporal"]["image"].startswith("temporalio/server:")
    assert services["temporal-schema"]["image"].startswith("temporalio/admin-tools:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert not any("auto-setup" in s.get("image", "") for s in services.values())
    assert {"api", "worker", "migrate", "mailpit", "prometheus"} <= set(services)
    for service in services.values():
        assert not service.get("image", "").endswith(":latest")


def test_worker_scales(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker
    assert worker["command"] == ["python", "worker.py"]


def test_search_attributes_are_registered(compose: dict[str, Any]) -> None:
    setup = "\n".join(compose["services"]["temporal-setup"]["command"])
    for key in search_attributes.ALL:
        assert key.name in setup


def test_prometheus_scrapes_api_and_workers(compose: dict[str, Any], project_root: Path) -> None:
    mount = compose["services"]["prometheus"]["volumes"][0].split(":")[0]
    config = yaml.safe_load((project_root / mount).read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["api"]["static_configs"][0]["targets"] == ["api:8000"]
    worker_port = int(compose["services"]["worker"]["environment"]["WORKER_METRICS_PORT"])
    assert jobs["worker"]["dns_sd_configs"][0]["port"] == worker_port
