"""Reading docker-compose.yml and .env.example the way `docker compose` does, for the deployment checks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
ENV_EXAMPLE = REPO_ROOT / ".env.example"

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, $VAR; `$$` is a literal dollar.
_VARIABLE = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """The compose file as data; PyYAML's safe loader resolves the `<<: *anchor` merges."""
    return yaml.safe_load(path.read_text())


def string_values(data: Any) -> list[str]:
    """Every string in the loaded compose data: what compose interpolates (comments are not)."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [text for key, value in data.items() for text in (*string_values(key), *string_values(value))]
    if isinstance(data, list):
        return [text for item in data for text in string_values(item)]
    return []


def variables_used(text: str) -> set[str]:
    """Names of the environment variables a compose file interpolates."""
    return {match.group(1) or match.group(4) for match in _VARIABLE.finditer(text)}


def env_example(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """Variables of an env file (`NAME=value` lines; comments and blank lines skipped)."""
    values = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENV_LINE.match(stripped)
        if match is None:
            raise ValueError(f"{path.name}:{number}: not a NAME=value line: {line!r}")
        values[match.group(1)] = match.group(2)
    return values


def interpolate(text: str, env: dict[str, str]) -> str:
    """Substitute variables like compose does (defaults for unset/empty; `?` errors become ValueError)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3) or ""
        value = env.get(name)
        if operator in (":-", "-"):
            return value if value or (operator == "-" and value is not None) else argument
        if operator in (":?", "?") and not (value or (operator == "?" and value is not None)):
            raise ValueError(f"{name}: {argument}")
        return value or ""

    return _VARIABLE.sub(replace, text).replace("$$", "$")


def published_host_ip(port: str | int | dict[str, Any]) -> str:
    """Host address a `ports:` entry binds; "0.0.0.0" when it names none (compose publishes on every interface)."""
    if isinstance(port, dict):
        return str(port.get("host_ip") or "0.0.0.0")
    parts = str(port).split(":")
    if len(parts) == 3:
        return parts[0] or "0.0.0.0"
    if str(port).startswith("["):  # [::1]:3000:3000
        return str(port)[1 : str(port).index("]")]
    return "0.0.0.0"


def image_tag_problem(image: str) -> str | None:
    """Why an image reference is not pinned (untagged or `latest`), else None. Digests are pinned."""
    if "@sha256:" in image:
        return None
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # "registry:5000/app" has a port, not a tag
        return f"{image}: no tag (pulls latest)"
    if tag == "latest":
        return f"{image}: the moving 'latest' tag"
    return None


def bind_mount_sources(service: dict[str, Any]) -> list[str]:
    """Host paths a service bind-mounts (short `src:dst[:mode]` syntax or long syntax with type bind)."""
    sources = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            if volume.get("type") == "bind":
                sources.append(volume["source"])
        elif volume.startswith(("./", "../", "/", "~")):
            sources.append(volume.split(":", 1)[0])
    return sources


def service_networks(service: dict[str, Any]) -> set[str]:
    """Networks a service joins (list or mapping syntax); compose puts a service that names none on `default`."""
    networks = service.get("networks")
    if networks is None:
        return {"default"}
    return set(networks)


def network_members(services: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Network -> the services on it."""
    members: dict[str, set[str]] = {}
    for name, service in services.items():
        for network in service_networks(service):
            members.setdefault(network, set()).add(name)
    return members


def network_peers(services: dict[str, dict[str, Any]], name: str) -> set[str]:
    """The other services `name` shares a network with: those that can open a connection to any of its ports."""
    return {peer for members in network_members(services).values() if name in members for peer in members} - {name}
