"""The project's two Python images against their base and their budgets, in the compose form (BENCHMARKS.md "Image
sizes"). Run by hand, not a timed test.

    .venv/bin/python bench/image_sizes.py --tag diet --build        # build both from deploy/Dockerfile.*, then measure
    .venv/bin/python bench/image_sizes.py --tag live --breakdown    # measure built images; largest packages and layers

Sizes are Docker's (`docker image inspect`'s Size: every layer, the base's included), in MB of 10^6 bytes as `docker
images` shows them. The base is the final stage's `FROM` of each Dockerfile, measured on this engine: the official
python:3.11-slim-bookworm, or the suite's stand-in under that name (tests/production/standins). `--build` builds as
docker-compose.yml does (repository root as the context, no build arguments, so without the Kubernetes launcher) with
the legacy builder the suite uses. Exits 1 when an image is over its budget.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MB = 10**6
# image -> (Dockerfile, MB the image may add to its base).
IMAGES = {
    "user-code": ("deploy/Dockerfile.user_code", 450),
    "dagster": ("deploy/Dockerfile.dagster", 220),
}
BUDGET_MB = {name: budget for name, (_, budget) in IMAGES.items()}
REPOSITORY = "racing-orchestration"
# Where the images' pip puts packages: the official image's Python under /usr/local, the stand-in's Debian Python in
# /usr/local/lib/python3.11/dist-packages; both listed, whichever exists counts.
SITE_PACKAGES = ("/usr/local/lib/python3.11/site-packages", "/usr/local/lib/python3.11/dist-packages")


@dataclass(frozen=True)
class BudgetRow:
    image: str
    size_bytes: int
    base_bytes: int
    budget_mb: float | None  # what the image may add to its base; None: no budget set for this image

    @property
    def size_mb(self) -> float:
        return round(self.size_bytes / MB, 1)

    @property
    def base_mb(self) -> float:
        return round(self.base_bytes / MB, 1)

    @property
    def above_base_mb(self) -> float:
        return round((self.size_bytes - self.base_bytes) / MB, 1)

    @property
    def within_budget(self) -> bool | None:
        """Judged on bytes, not the rounded MB: a budget of 450 MB is 450,000,000 bytes above the base."""
        return None if self.budget_mb is None else self.size_bytes - self.base_bytes <= self.budget_mb * MB


def image_budget_report(sizes: Mapping[str, int], base_size: int | Mapping[str, int],
                        budgets: Mapping[str, float] = BUDGET_MB) -> list[BudgetRow]:
    """One row per image, in `sizes`' order: its size, its base's, the difference and its budget.

    `sizes`: image name -> bytes; `base_size`: the base's bytes, one for all or per image name.
    """
    rows = []
    for image, size in sizes.items():
        base = base_size if isinstance(base_size, int) else base_size[image]
        if size < base:
            raise ValueError(f"{image}: {size} bytes is smaller than its base's {base}: not built on it")
        rows.append(BudgetRow(image, size, base, budgets.get(image)))
    return rows


def render_report(rows: list[BudgetRow]) -> str:
    lines = [f"{'image':<12} {'size MB':>8} {'base MB':>8} {'above base':>11} {'budget':>7}  verdict"]
    for row in rows:
        budget = "-" if row.budget_mb is None else f"{row.budget_mb:g}"
        verdict = {None: "no budget", True: "within", False: "OVER"}[row.within_budget]
        lines.append(f"{row.image:<12} {row.size_mb:>8.1f} {row.base_mb:>8.1f} {row.above_base_mb:>11.1f} "
                     f"{budget:>7}  {verdict}")
    return "\n".join(lines)


def final_base(dockerfile_text: str) -> str:
    """The image the final stage is built FROM (the last `FROM`), without its `AS` name."""
    froms = [line.split()[1:] for line in dockerfile_text.splitlines() if line.upper().startswith("FROM ")]
    if not froms:
        raise ValueError("no FROM line")
    words = [w for w in froms[-1] if not w.startswith("--")]
    return words[0]


_DIST_INFO = re.compile(r"^(?P<name>.+?)-[0-9][^-]*\.(dist|egg)-info$")


def package_of(entry: str) -> str:
    """The package a site-packages entry belongs to: `numpy.libs` and `numpy-2.4.6.dist-info` count with `numpy`."""
    match = _DIST_INFO.match(entry)
    name = match.group("name") if match else entry.removesuffix(".libs").removesuffix(".py")
    return name.lower().replace("-", "_")


def package_breakdown(du_kib: str, top: int = 25) -> list[tuple[str, float]]:
    """(package, MB) from `du -sk <site-packages>/*` output, largest first, its .libs and .dist-info included."""
    totals: dict[str, int] = {}
    for line in du_kib.splitlines():
        if not line.strip():
            continue
        kib, path = line.split(maxsplit=1)
        name = package_of(path.rstrip("/").rsplit("/", 1)[-1])
        totals[name] = totals.get(name, 0) + int(kib)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return [(name, round(kib * 1024 / MB, 1)) for name, kib in ranked[:top]]


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def image_bytes(reference: str) -> int:
    return int(docker("image", "inspect", "-f", "{{.Size}}", reference).strip())


def build(name: str, dockerfile: str, reference: str) -> None:
    print(f"building {reference} from {dockerfile}", file=sys.stderr)
    subprocess.run(["nice", "-n", "10", "docker", "build", "-q", "-f", dockerfile, "-t", reference, "."],
                   cwd=REPO_ROOT, check=True, env={**os.environ, "DOCKER_BUILDKIT": "0"}, stdout=subprocess.DEVNULL)


_DOCKER_SIZE = re.compile(r"^(?P<number>[0-9.]+)(?P<unit>B|kB|MB|GB)$")


def docker_size_bytes(text: str) -> int:
    """Bytes of a size as `docker history` prints it (`91.3MB`, `8.87kB`, `0B`; decimal units)."""
    match = _DOCKER_SIZE.match(text.strip())
    if match is None:
        raise ValueError(f"not a Docker size: {text!r}")
    return round(float(match.group("number")) * {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}[match.group("unit")])


# What the legacy builder puts before a layer's command: build arguments in force, the shell, `#(nop)` for metadata.
_SHELL_PREFIX = re.compile(r"^(\|\d+ (\S+=\S* )*)?/bin/sh -c (#\(nop\)\s*)?")


def large_layers(history: str, at_least: int = MB) -> list[tuple[str, str]]:
    """(size, what made it) of the layers of at least `at_least` bytes, from `docker history --format
    '{{.Size}}\\t{{.CreatedBy}}' --no-trunc` (newest first); the base's imported layer has no command."""
    layers = []
    for line in history.splitlines():
        size, _, created_by = line.partition("\t")
        if docker_size_bytes(size) >= at_least:
            command = _SHELL_PREFIX.sub("", created_by).strip() or "(base image)"
            layers.append((size, command))
    return layers


def breakdown(reference: str) -> str:
    script = " ".join(f'[ -d {path} ] && du -sk {path}/*;' for path in SITE_PACKAGES) + " true"
    du = docker("run", "--rm", "--entrypoint", "sh", reference, "-c", script)
    packages = "\n".join(f"  {name:<28} {mb:>6.1f}" for name, mb in package_breakdown(du))
    history = docker("history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", reference)
    layers = "\n".join(f"  {size:>8}  {command[:100]}" for size, command in large_layers(history))
    return f"{reference}: largest packages (MB)\n{packages}\n{reference}: layers of 1 MB or more, newest first\n{layers}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="diet", help="tag of racing-orchestration/{user-code,dagster} (default diet)")
    parser.add_argument("--build", action="store_true", help="build both images first, as docker-compose.yml does")
    parser.add_argument("--breakdown", action="store_true", help="also each image's largest packages and layers")
    args = parser.parse_args(argv)
    sizes, bases = {}, {}
    for name, (dockerfile, _) in IMAGES.items():
        reference = f"{REPOSITORY}/{name}:{args.tag}"
        if args.build:
            build(name, dockerfile, reference)
        sizes[name] = image_bytes(reference)
        bases[name] = image_bytes(final_base((REPO_ROOT / dockerfile).read_text()))
    rows = image_budget_report(sizes, bases)
    print(render_report(rows))
    if args.breakdown:
        for name in IMAGES:
            print()
            print(breakdown(f"{REPOSITORY}/{name}:{args.tag}"))
    return 0 if all(row.within_budget is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
