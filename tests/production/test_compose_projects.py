"""Two compose deployments side by side on one engine (tests/production/compose_stack.py): the generated override of a
project beside the production-named one, resolved by Docker Compose itself (`config`, no engine needed)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.production.compose_stack import (
    INSTANCE_YAML,
    NAMED_VOLUMES,
    PROJECT,
    REPO_ROOT,
    ComposeStack,
    instance_yaml_for,
)

pytestmark = pytest.mark.unit

BESIDE = "racing-orchestration-beside"
PORTS = {"front": 3100, "api": 8190, "prometheus": 9190}


def test_the_instance_of_a_project_beside_launches_runs_on_its_network_and_volumes() -> None:
    production = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    beside = yaml.safe_load(instance_yaml_for(BESIDE))
    launcher = beside["run_launcher"]["config"]
    assert launcher["network"] == BESIDE
    assert launcher["container_kwargs"]["volumes"] == [
        f"{BESIDE}-compute-logs:/opt/dagster/compute_logs", f"{BESIDE}-backup-sources:/data:ro",
        f"{BESIDE}-backups:/backups", f"{BESIDE}-exports:/exports"]
    # Nothing else differs.
    launcher.update(network=PROJECT, container_kwargs={
        **launcher["container_kwargs"],
        "volumes": [v.replace(f"{BESIDE}-", f"{PROJECT}-", 1) for v in launcher["container_kwargs"]["volumes"]]})
    assert beside == production


def resolved(stack: ComposeStack) -> dict:
    """`docker compose config` of the stack's files, with every variable docker-compose.yml requires set."""
    required = set(re.findall(r"\$\{([A-Z_]+):\?", (REPO_ROOT / "docker-compose.yml").read_text()))
    required |= {"ALERT_TEST_CONFIG_DIR"}
    stack.env_file.write_text("".join(f"{name}={stack.work_dir}\n" for name in sorted(required)))
    done = stack.compose("config", "--format", "json", timeout=60)
    return json.loads(done.stdout)


def published(service: dict) -> list[tuple[str, int]]:
    return [(p.get("host_ip"), int(p["published"])) for p in service.get("ports", [])]


def test_a_project_beside_has_its_own_ports_network_and_volumes(tmp_path) -> None:
    stack = ComposeStack(work_dir=tmp_path, project=BESIDE, host_ports=PORTS)
    config = resolved(stack)
    assert config["name"] == BESIDE  # `-p`: the compose file's own `name:` is the production one
    services = config["services"]
    # Replaced, not added to: the production ports are not published by this project.
    assert published(services["front"]) == [("127.0.0.1", 3100)]
    assert not published(services["webserver"])
    assert published(services["api"]) == [("127.0.0.1", 8190)]
    assert published(services["prometheus"]) == [("127.0.0.1", 9190)]
    assert published(services["alertmanager"]) == [("127.0.0.1", 9093)]  # not asked for: unchanged
    assert config["networks"]["runs"]["name"] == BESIDE
    assert {name: config["volumes"][name]["name"] for name in NAMED_VOLUMES} == {
        name: f"{BESIDE}-{name}" for name in NAMED_VOLUMES}
    assert {name: stack.volume(name) for name in NAMED_VOLUMES} == {
        name: config["volumes"][name]["name"] for name in NAMED_VOLUMES}  # what the soak reads its folders from
    for name in ("migrate", "code-racing", "code-maintenance", "webserver", "daemon", "api"):
        mounts = {m["target"]: m["source"] for m in services[name].get("volumes", [])}
        assert mounts[INSTANCE_YAML] == str(tmp_path / "instance" / "dagster.yaml"), name
    assert yaml.safe_load((tmp_path / "instance" / "dagster.yaml").read_text())["run_launcher"]["config"][
        "network"] == BESIDE
    assert stack.ui_url == "http://127.0.0.1:3100" and stack.api_url == "http://127.0.0.1:8190"
    assert stack.dagster_url.endswith("@127.0.0.1:3100")  # the front's login for the tests' clients


def test_the_production_named_project_is_the_compose_file_unchanged(tmp_path) -> None:
    stack = ComposeStack(work_dir=tmp_path)
    config = resolved(stack)
    assert config["name"] == PROJECT
    assert published(config["services"]["front"]) == [("127.0.0.1", 3000)]
    assert not published(config["services"]["webserver"])
    assert published(config["services"]["api"]) == [("127.0.0.1", 8090)]
    assert config["networks"]["runs"]["name"] == PROJECT
    assert stack.volume("compute-logs") == config["volumes"]["compute-logs"]["name"] == "racing-orchestration-compute-logs"
    assert INSTANCE_YAML not in {m["target"] for m in config["services"]["daemon"].get("volumes", [])}
    assert (stack.ui_url, stack.api_url) == ("http://127.0.0.1:3000", "http://127.0.0.1:8090")


def test_the_production_named_project_publishes_only_the_production_ports(tmp_path) -> None:
    with pytest.raises(ValueError, match="production ports"):
        ComposeStack(work_dir=tmp_path, host_ports={"front": 3100})


def test_a_volume_the_deployment_does_not_name_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="not one of the named volumes"):
        ComposeStack(work_dir=tmp_path).volume("postgres-data")  # compose's own naming, not a fixed name
