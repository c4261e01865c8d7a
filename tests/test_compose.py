"""deploy/compose: the local observability stack, checked without Docker.

Images are pinned, every bind-mounted file is in the repository, every port is
published on loopback only, and the files the services read point at each
other correctly (Grafana provisioning, Prometheus rules and scrape targets,
the collector's environment, Tempo's receiver).
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE = COMPOSE_DIR / "compose.yaml"
PROMETHEUS_CONFIG = COMPOSE_DIR / "prometheus.yml"
TEMPO_CONFIG = COMPOSE_DIR / "tempo.yaml"
COLLECTOR_CONFIG = ROOT / "collector-config.yaml"
ALERT_RULES = ROOT / "dashboards" / "alerts" / "seamscope-alerts.rules.yaml"
DATASOURCES = ROOT / "dashboards" / "provisioning" / "datasources" / "seamscope.yaml"
DASHBOARD_PROVIDER = ROOT / "dashboards" / "provisioning" / "dashboards" / "seamscope.yaml"
COMPONENTS_FILE = ROOT / "tests" / "data" / "otelcol-contrib-0.136.0-components.txt"

PINNED_TAG = re.compile(r"^v?\d+(\.\d+){1,2}([-.][\w.]+)?$")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = _load(COMPOSE)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _volumes(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of every volume, short or long syntax."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume.get("source", ""), volume["target"]
        mounts.append((source, target))
    return mounts


def _binds(service: dict[str, Any]) -> dict[str, Path]:
    """container path -> host path (resolved) of every bind mount."""
    return {
        target: (COMPOSE_DIR / source).resolve()
        for source, target in _volumes(service)
        if source.startswith((".", "/"))
    }


def _command_flag(service: dict[str, Any], flag: str) -> str:
    command = service.get("command") or []
    for arg in command:
        if arg.startswith(flag + "="):
            return str(arg.split("=", 1)[1])
    raise AssertionError(f"{flag} not in {command}")


def test_the_expected_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"otel-collector", "jaeger", "tempo", "prometheus", "grafana"} == set(services)


def test_every_image_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service["image"]
        assert "@" not in image or image.count(":") >= 2, image
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert "latest" != tag, f"{name}: {image}"
        assert PINNED_TAG.match(tag), f"{name}: {image} is not pinned to a release"


def test_pinned_versions(services: dict[str, dict[str, Any]]) -> None:
    images = {name: service["image"] for name, service in services.items()}
    collector_version = images["otel-collector"].rpartition(":")[2]
    assert images["otel-collector"].startswith("otel/opentelemetry-collector-contrib:")
    # the component list the configs are checked against is for this release
    assert f"otelcol-contrib-{collector_version}-components.txt" == COMPONENTS_FILE.name
    assert COMPONENTS_FILE.exists()
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", images["jaeger"])
    assert re.fullmatch(r"grafana/tempo:2\.\d+\.\d+", images["tempo"])
    assert re.fullmatch(r"prom/prometheus:v2\.\d+\.\d+", images["prometheus"])
    assert re.fullmatch(r"grafana/grafana:11\.6\.\d+", images["grafana"])


def test_every_bind_mount_exists_in_the_repository(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    named = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, target in _volumes(service):
            assert target.startswith("/"), f"{name}: {target}"
            if source.startswith((".", "/")):
                host = (COMPOSE_DIR / source).resolve()
                assert host.exists(), f"{name}: {source} does not exist"
                assert host.is_relative_to(ROOT), f"{name}: {source} is outside the repository"
            else:
                assert source in named, f"{name}: volume {source} is not declared"


def test_every_published_port_binds_loopback(services: dict[str, dict[str, Any]]) -> None:
    published = 0
    for name, service in services.items():
        for port in service.get("ports") or []:
            published += 1
            if isinstance(port, dict):
                assert "127.0.0.1" == port.get("host_ip"), f"{name}: {port}"
            else:
                parts = str(port).split(":")
                assert 3 == len(parts) and "127.0.0.1" == parts[0], f"{name}: {port}"
        assert "host" != service.get("network_mode"), name
    assert published >= 5


def test_grafana_mounts_provisioning_and_dashboards(services: dict[str, dict[str, Any]]) -> None:
    grafana = services["grafana"]
    binds = _binds(grafana)
    assert (ROOT / "dashboards" / "provisioning") == binds["/etc/grafana/provisioning"]

    provider_path = _load(DASHBOARD_PROVIDER)["providers"][0]["options"]["path"]
    assert (ROOT / "dashboards") == binds[provider_path]
    for name in ("seamscope-decisions.json", "seamscope-offload-economics.json"):
        assert (binds[provider_path] / name).exists()

    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(provider_path + "/")
    assert (binds[provider_path] / home[len(provider_path) + 1 :]).exists()


def test_grafana_viewers_are_read_only(services: dict[str, dict[str, Any]]) -> None:
    environment = services["grafana"]["environment"]
    assert ("Viewer", "false", "false") == (
        environment["GF_AUTH_ANONYMOUS_ORG_ROLE"],
        environment["GF_USERS_VIEWERS_CAN_EDIT"],
        environment["GF_USERS_ALLOW_SIGN_UP"],
    )


def test_grafana_admin_password_is_required_from_the_environment(
    services: dict[str, dict[str, Any]],
) -> None:
    """``${VAR:?message}``: compose refuses to start when the variable is unset
    or empty; no ``:-default``, and no password written in the file."""
    password = services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", password), password


def test_grafana_datasources_point_at_compose_services(
    services: dict[str, dict[str, Any]],
) -> None:
    ports = {"prometheus": 9090, "tempo": 3200, "jaeger": 16686}
    for datasource in _load(DATASOURCES)["datasources"]:
        host, port = re.fullmatch(r"http://([\w-]+):(\d+)", datasource["url"]).groups()
        assert host in services, datasource["url"]
        assert ports[host] == int(port)


def test_prometheus_loads_the_mounted_rule_file(services: dict[str, dict[str, Any]]) -> None:
    prometheus = services["prometheus"]
    binds = _binds(prometheus)
    config_path = _command_flag(prometheus, "--config.file")
    assert PROMETHEUS_CONFIG.resolve() == binds[config_path]

    rule_files = _load(PROMETHEUS_CONFIG)["rule_files"]
    assert rule_files
    for rule_file in rule_files:
        assert rule_file in binds, f"{rule_file} is not mounted"
        assert binds[rule_file].exists()
    assert ALERT_RULES.resolve() in {binds[r] for r in rule_files}


def test_prometheus_scrapes_the_collector_and_the_host_process(
    services: dict[str, dict[str, Any]],
) -> None:
    targets = {
        target
        for job in _load(PROMETHEUS_CONFIG)["scrape_configs"]
        for static in job.get("static_configs") or []
        for target in static["targets"]
    }
    exporter = _load(COLLECTOR_CONFIG)["exporters"]["prometheus"]["endpoint"]
    exporter_port = re.search(r":(\d+)\}?$", exporter).group(1)
    assert f"otel-collector:{exporter_port}" in targets
    assert "host.docker.internal:9464" in targets
    assert "host.docker.internal:host-gateway" in services["prometheus"]["extra_hosts"]


def test_scrape_interval_matches_grafana_time_interval() -> None:
    interval = _load(PROMETHEUS_CONFIG)["global"]["scrape_interval"]
    prometheus = next(d for d in _load(DATASOURCES)["datasources"] if d["uid"] == "prometheus")
    assert interval == prometheus["jsonData"]["timeInterval"]


def test_collector_runs_the_repository_config(services: dict[str, dict[str, Any]]) -> None:
    collector = services["otel-collector"]
    binds = _binds(collector)
    config_path = next(a for a in collector["command"] if a.startswith("--config=")).split("=")[1]
    assert COLLECTOR_CONFIG.resolve() == binds[config_path]

    # every variable compose sets is one the configuration reads
    read = set(re.findall(r"\$\{env:(\w+)", COLLECTOR_CONFIG.read_text(encoding="utf-8")))
    environment = collector["environment"]
    assert set(environment) <= read
    for variable in ("OTLP_GRPC_ENDPOINT", "OTLP_HTTP_ENDPOINT", "PROMETHEUS_EXPORTER_ENDPOINT"):
        assert environment[variable].startswith("0.0.0.0:"), variable
    for variable, service in (("JAEGER_OTLP_ENDPOINT", "jaeger"), ("TEMPO_OTLP_ENDPOINT", "tempo")):
        assert f"{service}:4317" == environment[variable]
        assert service in services


def test_collector_publishes_otlp_ports(services: dict[str, dict[str, Any]]) -> None:
    ports = {str(p).split(":")[-1] for p in services["otel-collector"]["ports"]}
    assert {"4317", "4318"} <= ports


def test_tempo_receives_otlp_on_the_compose_network(services: dict[str, dict[str, Any]]) -> None:
    tempo = services["tempo"]
    config_flag = next(a for a in tempo["command"] if a.startswith("-config.file="))
    assert TEMPO_CONFIG.resolve() == _binds(tempo)[config_flag.split("=", 1)[1]]
    config = _load(TEMPO_CONFIG)
    grpc = config["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]
    assert "0.0.0.0:4317" == grpc["endpoint"]
    assert 3200 == config["server"]["http_listen_port"]
