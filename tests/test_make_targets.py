"""`make test` reads as pytest and installs what its tests run; `.ci/run` is a thin call of it.

The Debian packages are installed by tools/system_packages.sh; here it runs with a PATH of stubs (`id`, `apt-get`,
`sudo`, the tools it looks for), so what it would install, and how, is recorded instead of done.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

SCRIPT = REPO_ROOT / "tools" / "system_packages.sh"
TOOLS = {"promtool": "prometheus", "amtool": "prometheus-alertmanager", "nginx": "nginx",
         "chromium": "chromium", "dockerd": "docker.io", "mmdebstrap": "mmdebstrap"}
FAST = {"promtool", "amtool", "nginx"}


def recipe(target: str) -> list[str]:
    """The recipe lines of a Makefile target."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(target)}:", line))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        body.append(line.strip())
    return body


def make_dry_run(*variables: str, **env: str) -> list[str]:
    """The commands `make -n test` would run with these variables, one line each."""
    return subprocess.run(["make", "-n", "test", *variables], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env}, check=True).stdout.splitlines()


def test_make_test_runs_pytest_and_nothing_that_only_measures_it() -> None:
    header = next(line for line in (REPO_ROOT / "Makefile").read_text().splitlines() if line.startswith("test:"))
    assert "system-packages" in header.split()
    # First the image builds, in the background; then one collection that writes pytest's cache of the rewritten test
    # modules for the workers to read.
    prebuild, collect_once, command = recipe("test")
    assert prebuild == "$(PREBUILD_IMAGES)"
    assert collect_once == "$(COLLECT_ONCE)"
    assert command.startswith("$(RUN_TESTS) -n $(TEST_WORKERS) $(PYTEST_ARGS);") and "bench/" not in command
    assert "junit" not in command


def test_the_suite_runs_under_slipcover_unless_coverage_is_off() -> None:
    covered = make_dry_run("BUILD_IMAGES_AHEAD=0")[-1]
    assert "-m slipcover --json --out test-artifacts/coverage.json -m pytest -n 5" in covered, covered
    assert "-m slipcover --merge test-artifacts/coverage.json --out /dev/null --skip-covered --fail-under 80" in covered
    plain = make_dry_run("BUILD_IMAGES_AHEAD=0", "COVERAGE=0")[-1]
    assert "-m pytest -n 5" in plain and "slipcover" not in plain, plain


@pytest.mark.parametrize(("pytest_status", "floor_status", "make_fails"), [
    (0, 0, False),
    (1, 0, True),  # a failed test fails the run even with the coverage floor met
    (0, 2, True),  # every test passed, coverage under the floor
    (1, 2, True),
])
def test_make_test_fails_when_the_tests_or_the_coverage_floor_fail(
        tmp_path: Path, pytest_status: int, floor_status: int, make_fails: bool) -> None:
    """The recipe's own command line, run with a stand-in interpreter that plays pytest (under slipcover) and the floor
    check (`slipcover --merge ... --fail-under 80`) with the given exit statuses."""
    stand_in = tmp_path / "bin" / "python"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/bash\ncase "$*" in *--merge*) exit {floor_status};; *) exit {pytest_status};; esac\n')
    stand_in.chmod(0o755)
    command = make_dry_run(f"BIN={stand_in.parent}", "BUILD_IMAGES_AHEAD=0")[-1]
    assert command.count(str(stand_in)) == 2, command
    done = subprocess.run(["/bin/bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert (done.returncode != 0) == make_fails, (command, done.returncode)


def test_the_collection_before_the_suite_writes_the_cache_and_never_fails_make() -> None:
    """With PYTHONDONTWRITEBYTECODE set nothing writes the cache; a broken test module is the real run's to report."""
    dry_run = "\n".join(make_dry_run(PYTHONDONTWRITEBYTECODE="1"))
    [collect] = [line for line in dry_run.splitlines() if "--collect-only" in line]
    assert collect.startswith("PYTHONDONTWRITEBYTECODE= ") and collect.endswith("|| true"), collect
    assert dry_run.index("--collect-only") < dry_run.index("pytest -n ")


@pytest.mark.parametrize(("variables", "built_ahead"), [
    ([], True),
    (["PYTEST_ARGS=tests/test_settings.py"], False),
    (["PYTEST_ARGS=-x", "BUILD_IMAGES_AHEAD=1"], True),
    (["BUILD_IMAGES_AHEAD=0"], False),
])
def test_the_whole_suite_builds_the_images_ahead_in_the_background(variables: list[str], built_ahead: bool) -> None:
    """Started before the collection and not waited for (a trailing `&`), its output in a log of its own; a run of a
    few files (PYTEST_ARGS) builds nothing ahead unless BUILD_IMAGES_AHEAD=1 says so, and =0 turns it off."""
    lines = make_dry_run(*variables)
    prebuild = [line for line in lines if "tests.production.prebuild_images" in line]
    if not built_ahead:
        assert prebuild == [] and ": no images built ahead: BUILD_IMAGES_AHEAD=0" in lines
        return
    [line] = prebuild
    assert line.endswith("> test-artifacts/prebuild-images.log 2>&1 &"), line
    assert lines.index(line) < next(i for i, text in enumerate(lines) if "--collect-only" in text)


def test_the_measured_suite_is_a_target_of_its_own() -> None:
    commands = " ".join(recipe("test-measured"))
    assert "--junitxml" in commands and "bench/suite_host.py" in commands


def test_ci_run_is_a_thin_call_of_make_test() -> None:
    code = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert code[-1] == "TZ=Pacific/Auckland make test"
    assert not any("apt-get" in line for line in code)


def stubs(tmp_path: Path, present: set[str], uid: int, sudo: bool) -> tuple[Path, Path]:
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in [*present, "apt-get", *(["sudo"] if sudo else [])]:
        body = f'echo "{name} $*" >> {log}\n'
        if name == "sudo":  # `sudo -n true` answers yes; `sudo VAR=value command` runs it as env would
            body += '[ "$1" = -n ] && exit 0\nexec /usr/bin/env "$@"\n'
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "id").write_text(f"#!/bin/bash\necho {uid}\n")
    (bin_dir / "id").chmod(0o755)
    return bin_dir, log


def run_script(tier: str, bin_dir: Path) -> subprocess.CompletedProcess:
    # Only the stubs on PATH; /usr/sbin and /sbin are looked at too, so tools installed there count as present.
    return subprocess.run(["/bin/bash", str(SCRIPT), tier], env={"PATH": str(bin_dir)}, capture_output=True,
                          text=True, timeout=30)


def installed_here(tool: str) -> bool:
    return Path("/usr/sbin", tool).exists() or Path("/sbin", tool).exists()


@pytest.mark.parametrize("tier", ["fast", "all"])
def test_nothing_is_installed_when_every_tool_is_there(tmp_path: Path, tier: str) -> None:
    bin_dir, log = stubs(tmp_path, set(TOOLS), uid=0, sudo=False)
    done = run_script(tier, bin_dir)
    assert done.returncode == 0 and not log.exists(), (done.stderr, log.read_text() if log.exists() else "")


@pytest.mark.parametrize(("tier", "uid", "sudo", "how"), [
    ("all", 0, False, "apt-get"),  # root: apt-get itself
    ("fast", 0, False, "apt-get"),
    ("all", 1000, True, "sudo"),  # a user with sudo: through it, saying so
])
def test_missing_tools_are_installed(tmp_path: Path, tier: str, uid: int, sudo: bool, how: str) -> None:
    wanted = set(TOOLS) if tier == "all" else FAST
    missing = {tool for tool in wanted if not installed_here(tool)} | {"promtool", "amtool"}
    bin_dir, log = stubs(tmp_path, set(TOOLS) - missing, uid=uid, sudo=sudo)
    done = run_script(tier, bin_dir)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    install = next(line for line in calls if "install" in line)
    assert install.startswith("sudo " if how == "sudo" else "apt-get ")
    assert set(install.split()[-len(missing):]) == {TOOLS[tool] for tool in missing}
    assert ("through sudo" in done.stderr) == (how == "sudo")


def test_without_root_or_sudo_it_names_what_is_missing_and_installs_nothing(tmp_path: Path) -> None:
    bin_dir, log = stubs(tmp_path, set(TOOLS) - {"promtool"}, uid=1000, sudo=False)
    done = run_script("fast", bin_dir)
    assert done.returncode == 0
    assert "Missing Debian packages: prometheus" in done.stderr and "tests that need them fail" in done.stderr
    assert not log.exists()
