"""Copy the files the Kubernetes form shares with the compose form into deploy/kubernetes/base/generated/.

kustomize loads files only from inside the kustomization's folder (its load restrictor), and `kubectl apply -k` has
no flag to lift that, so the Prometheus rules and config, the Alertmanager routes, template and entrypoint, the
Postgres first-start script and the workspace are committed here as exact copies of their compose sources, which
stay the ones to edit. Run `.venv/bin/python deploy/kubernetes/base/scripts/sync_from_compose.py` after changing any of
them; tests/deploy/kubernetes/test_generated.py fails while a copy differs from its source.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[4]
GENERATED_DIR = REPO_ROOT / "deploy" / "kubernetes" / "base" / "generated"
# Copy name in generated/ -> source, relative to the repository root.
SOURCES = {
    "prometheus.yml": "deploy/prometheus/prometheus.yml",
    "alerts.yml": "deploy/prometheus/alerts.yml",
    "alertmanager.yml": "deploy/alertmanager/alertmanager.yml",
    "slack.tmpl": "deploy/alertmanager/slack.tmpl",
    "alertmanager-entrypoint.sh": "deploy/alertmanager/entrypoint.sh",
    "init-databases.sh": "deploy/postgres/init-databases.sh",
    "workspace.yaml": "deploy/workspace.yaml",
}


def stale_copies(generated_dir: Path = GENERATED_DIR, repo_root: Path = REPO_ROOT) -> list[str]:
    """Names of the copies that are missing or differ from their source."""
    return [name for name, source in SOURCES.items()
            if not (generated_dir / name).is_file()
            or (generated_dir / name).read_bytes() != (repo_root / source).read_bytes()]


def sync(generated_dir: Path = GENERATED_DIR, repo_root: Path = REPO_ROOT) -> list[str]:
    """Rewrite the stale copies; returns their names."""
    stale = stale_copies(generated_dir, repo_root)
    generated_dir.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (generated_dir / name).write_bytes((repo_root / SOURCES[name]).read_bytes())
    return stale


def main() -> int:
    for name in sync():
        print(f"updated deploy/kubernetes/base/generated/{name} from {SOURCES[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
