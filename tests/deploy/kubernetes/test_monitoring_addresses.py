"""The control API's code-server addresses in the Kubernetes form: each names, by Service DNS, the Service in front of
the code server that serves that location on that port, the same as the workspace the webserver and daemon load."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.kubernetes.manifests import api_code_servers, find, render

pytestmark = pytest.mark.unit


def workspace_servers(objects: list[dict]) -> set[tuple[str, str, int]]:
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(
        "dagster-workspace")]
    workspace = yaml.safe_load(config_map["data"]["workspace.yaml"])
    return {(e["grpc_server"]["location_name"], e["grpc_server"]["host"], e["grpc_server"]["port"])
            for e in workspace["load_from"]}


def test_the_api_pings_every_location_the_workspace_loads_at_the_same_addresses() -> None:
    objects = render()
    servers = api_code_servers(objects)
    assert {(s.location, s.host, s.port) for s in servers} == workspace_servers(objects)
    assert len(servers) == 2


@pytest.mark.parametrize("location", ["racing_orchestration", "maintenance_jobs"])
def test_each_address_is_the_service_of_the_code_server_serving_its_location(location: str) -> None:
    objects = render()
    [server] = [s for s in api_code_servers(objects) if s.location == location]
    service = find(objects, "Service", server.host)  # Service DNS: the name, in the API's own namespace
    [port] = [p for p in service["spec"]["ports"] if p["port"] == server.port]
    selected = [o for o in objects if o["kind"] == "Deployment"
                and service["spec"]["selector"].items() <= o["spec"]["template"]["metadata"]["labels"].items()]
    assert len(selected) == 1, f"Service {server.host} selects {len(selected)} Deployments"
    [container] = [c for c in selected[0]["spec"]["template"]["spec"]["containers"]
                   if c["name"] == "code-server"]
    command = container["command"]
    assert command[command.index("--location-name") + 1] == location
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[port["targetPort"]] == int(command[command.index("-p") + 1])
