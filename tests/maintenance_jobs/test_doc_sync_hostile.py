"""Doc sync against upstreams an attacker controls, built with plain git commands: their content stays data.

Each hostile upstream is a bare repository whose objects were written by hand (`hash-object --literally`,
`mktree`, `commit-tree`), as someone with push access to a mirrored project could. After every sync the tests check
that nothing ran (a hook would touch a marker), that no file appeared outside the mirror, and that the target
repository holds only the docs.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from maintenance_jobs.executor_configs import DocSyncConfig
from maintenance_jobs.executors.doc_sync import SYNC_INFO_FILE, GitCommandError, sync_docs, target_repo_url
from tests.maintenance_jobs.test_doc_sync import local_test_remotes, log  # noqa: F401 (file:// remotes, a logger)

pytestmark = pytest.mark.executor

NOW = dt.datetime(2025, 6, 11, 4, 0, tzinfo=dt.UTC)
CANARY = "canary-secret-4c1d5e"


def git(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True)
    return done.stdout.decode().strip()


def blob(repo: Path, content: bytes) -> str:
    return git("hash-object", "-w", "--stdin", cwd=repo, stdin=content)


def tree(repo: Path, entries: list[tuple[str, str, str]], *, literally: bool = False) -> str:
    """A tree object of (mode, name, object id) in the order given; `literally` skips git's own checks."""
    if not literally:
        kinds = {"40000": "tree", "160000": "commit"}
        text = "".join(f"{mode} {kinds.get(mode, 'blob')} {oid}\t{name}\n" for mode, name, oid in entries)
        return git("mktree", "--missing", cwd=repo, stdin=text.encode())
    raw = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    return git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", cwd=repo, stdin=raw)


def publish(repo: Path, root_tree: str, message: str = "docs") -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@a"}
    commit = subprocess.run(["git", "commit-tree", root_tree, "-m", message], cwd=repo, env=env, check=True,
                            capture_output=True, text=True).stdout.strip()
    git("update-ref", "refs/heads/main", commit, cwd=repo)
    return commit


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def hook_script(marker: Path) -> bytes:
    return f"#!/bin/sh\necho ran >> {marker}\nenv >> {marker}\n".encode()


class Sandbox:
    """The upstream, the Gitea target and the executor's work dir, all under one temp folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.upstream = root / "upstream.git"
        git("init", "-q", "--bare", "-b", "main", str(self.upstream))
        self.gitea = root / "gitea"
        self.target = self.gitea / "library" / "docs-evil.git"
        git("init", "-q", "--bare", "-b", "main", str(self.target))
        self.work = root / "work"

    def config(self, docs_paths: list[str]) -> DocSyncConfig:
        return DocSyncConfig(project="evil", upstream_repo=f"file://{self.upstream}", docs_paths=docs_paths,
                             gitea_repo="library/docs-evil")

    def sync(self, docs_paths: list[str], log: logging.Logger):
        url = target_repo_url(f"file://{self.gitea}", "library/docs-evil")
        return sync_docs(self.config(docs_paths), target_url=url, token=CANARY, work_dir=self.work, now=NOW, log=log)

    def target_files(self) -> list[str]:
        if not git("branch", "--list", cwd=self.target):
            return []
        return sorted(git("ls-tree", "-r", "--name-only", "main", cwd=self.target).splitlines())

    def executable_files_in_work(self) -> list[Path]:
        """Every file under the work dir git could run: anything in a hooks folder or with an exec bit."""
        found = []
        for path in self.work.rglob("*") if self.work.exists() else []:
            if path.is_symlink() or not path.is_file():
                continue
            if "hooks" in path.parts or path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
                found.append(path)
        return found

    def files_outside_work_and_repos(self) -> list[Path]:
        expected = {self.upstream, self.gitea, self.work}
        return [p for p in self.root.iterdir() if p not in expected and p.name != "PWNED"]


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


def hook_through_symlink_tree(sandbox: Sandbox, marker: Path, link_target: str) -> str:
    """The reported attack: `x` twice in one tree, a symlink into the checkout's .git and a folder of hooks that an
    extraction writes through it. git's own checks (fsck) refuse such a tree; nothing else would."""
    repo = sandbox.upstream
    script = blob(repo, hook_script(marker))
    hooks = tree(repo, [("100755", name, script) for name in ("post-commit", "pre-commit", "pre-push",
                                                              "reference-transaction")])
    link = blob(repo, link_target.encode())
    page = blob(repo, b"# Docs\n")
    return tree(repo, [("100644", "index.md", page), ("120000", "x", link), ("40000", "x", hooks)], literally=True)


@pytest.mark.parametrize("docs_paths", [["docs"], []], ids=["docs_paths", "whole_repository"])
def test_a_hook_planted_through_a_symlink_never_runs_and_never_lands(
    sandbox: Sandbox, marker: Path, log, docs_paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_ENV", CANARY)  # a secret in the run worker's environment
    if docs_paths:
        crafted = hook_through_symlink_tree(sandbox, marker, "../.git/hooks")
        publish(sandbox.upstream, tree(sandbox.upstream, [("40000", "docs", crafted)]))
    else:
        publish(sandbox.upstream, hook_through_symlink_tree(sandbox, marker, ".git/hooks"))

    with pytest.raises(GitCommandError, match="integrity"):
        sandbox.sync(docs_paths, log)
    assert not marker.exists(), marker.read_text()[:2000]
    assert sandbox.executable_files_in_work() == []
    assert sandbox.target_files() == []  # nothing pushed
    assert sandbox.files_outside_work_and_repos() == []

    # The upstream is put right: the next sync of the same project succeeds, and still runs nothing.
    page = blob(sandbox.upstream, b"# Docs, fixed\n")
    fixed = tree(sandbox.upstream, [("100644", "index.md", page)])
    publish(sandbox.upstream, tree(sandbox.upstream, [("40000", "docs", fixed)]) if docs_paths else fixed)
    result = sandbox.sync(docs_paths, log)
    assert result.changed
    assert not marker.exists()
    assert sandbox.executable_files_in_work() == []
    expected = ["docs/index.md"] if docs_paths else ["index.md"]
    assert sandbox.target_files() == [SYNC_INFO_FILE, *expected]


def test_symlinks_submodules_and_a_planted_sync_info_are_left_out_and_reported(sandbox: Sandbox, log) -> None:
    repo = sandbox.upstream
    page = blob(repo, b"# Docs\n")
    docs = tree(repo, [
        ("120000", "escape", blob(repo, b"../../../../../../etc")),
        ("100644", "index.md", page),
        ("120000", "passwd.md", blob(repo, b"/etc/passwd")),
        ("160000", "vendored", "1" * 40),  # a submodule: a commit of another repository
    ])
    forged = blob(repo, b"forged\n")
    publish(repo, tree(repo, [("100644", SYNC_INFO_FILE, forged), ("40000", "docs", docs)]))
    result = sandbox.sync([], log)
    assert result.files == 1 and result.skipped == (
        f"{SYNC_INFO_FILE} (written by the sync)",
        "docs/escape (symlink)", "docs/passwd.md (symlink)", "docs/vendored (submodule)",
    )
    assert "left out 4 entries" in result.message
    assert sandbox.target_files() == [SYNC_INFO_FILE, "docs/index.md"]
    assert "forged" not in git("show", f"main:{SYNC_INFO_FILE}", cwd=sandbox.target)
    assert sandbox.executable_files_in_work() == []
    # No upstream file was ever written to disk: only git's own object files are in the work dir.
    written = {p.relative_to(sandbox.work).as_posix() for p in sandbox.work.rglob("*")
               if p.is_file() and "objects" not in p.parts and "refs" not in p.parts}
    assert written <= {"doc_sync/evil.lock", *(f"doc_sync/evil/mirror.git/{name}" for name in
                                              ("FETCH_HEAD", "HEAD", "config", "packed-refs", "shallow"))}, written


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git", ".git.", "git~1"])
def test_a_dot_git_component_anywhere_fails_the_sync(sandbox: Sandbox, log, name: str) -> None:
    repo = sandbox.upstream
    inner = tree(repo, [("100644", "config", blob(repo, b"[core]\n\thooksPath = /tmp\n"))])
    docs = tree(repo, [("100644", "index.md", blob(repo, b"x")), ("40000", name, inner)])
    publish(repo, tree(repo, [("40000", "docs", docs)]))
    with pytest.raises(GitCommandError, match=r"integrity|\.git component"):
        sandbox.sync(["docs"], log)
    assert sandbox.target_files() == []


def _plant_hook(repo_dir: Path, marker: Path) -> None:
    hooks = repo_dir / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in ("reference-transaction", "pre-push", "post-update", "pre-commit", "post-commit"):
        (hooks / name).write_bytes(hook_script(marker))
        (hooks / name).chmod(0o755)


@pytest.mark.parametrize("tamper", ["hooks", "config", "alternates", "old_layout", "symlinked_cache"])
def test_a_tampered_cache_is_rebuilt_and_runs_nothing(
    sandbox: Sandbox, marker: Path, log, tamper: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    page = blob(sandbox.upstream, b"# Docs\n")
    publish(sandbox.upstream, tree(sandbox.upstream, [("40000", "docs", tree(sandbox.upstream,
                                                                              [("100644", "a.md", page)]))]))
    sandbox.sync(["docs"], log)
    project = sandbox.work / "doc_sync" / "evil"
    mirror = project / "mirror.git"
    if tamper == "hooks":
        _plant_hook(mirror, marker)
    elif tamper == "config":
        with (mirror / "config").open("a") as handle:
            handle.write(f'\tfsmonitor = "echo ran >> {marker}"\n[url "file:///nowhere/"]\n\tinsteadOf = file://\n')
    elif tamper == "alternates":
        (mirror / "objects" / "info").mkdir(exist_ok=True)
        (mirror / "objects" / "info" / "alternates").write_text(str(tmp_path / "elsewhere"))
    elif tamper == "old_layout":  # the work tree an earlier version kept, with a hook a crafted upstream planted
        git("init", "-q", str(project / "target"))
        _plant_hook(project / "target" / ".git", marker)
    else:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        _plant_hook(elsewhere, marker)
        shutil.rmtree(project)
        project.symlink_to(elsewhere)
    publish(sandbox.upstream, tree(sandbox.upstream, [("40000", "docs", tree(
        sandbox.upstream, [("100644", "a.md", page), ("100644", "b.md", blob(sandbox.upstream, b"new"))]))]))
    with caplog.at_level(logging.WARNING):
        result = sandbox.sync(["docs"], log)
    assert result.changed and sandbox.target_files() == [SYNC_INFO_FILE, "docs/a.md", "docs/b.md"]
    assert not marker.exists()
    assert "rebuilt" in caplog.text
    assert not project.is_symlink() and sorted(p.name for p in project.iterdir()) == ["mirror.git"]
    assert not (mirror / "hooks").exists()
    if tamper == "symlinked_cache":
        assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["hooks"]  # never written through


class RecordingGit:
    """A `git` first on PATH that records each call's arguments and environment, then runs the real git (or, for
    fetches over https that would leave this machine, fails as an unreachable host would)."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.log = root / "calls"
        self.log.mkdir()
        real = shutil.which("git")
        script = self.bin / "git"
        script.write_text(
            "#!/bin/sh\n"
            f'call="{self.log}/$(date +%s%N)-$$"\n'
            'printf "%s\\n" "$@" > "$call.args"\n'
            'env > "$call.env"\n'
            'case "$*" in *fetch*https://*) echo "fatal: unable to access: Failed to connect" >&2; exit 128;; esac\n'
            f'exec {real} "$@"\n'
        )
        script.chmod(0o755)

    def calls(self) -> list[tuple[list[str], str]]:
        found = []
        for args in sorted(self.log.glob("*.args")):
            env = args.with_suffix(".env").read_text()
            found.append((args.read_text().splitlines(), env))
        return found


def test_git_runs_with_a_clean_environment_and_the_token_only_towards_the_target(
    sandbox: Sandbox, log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = blob(sandbox.upstream, b"# Docs\n")
    publish(sandbox.upstream, tree(sandbox.upstream, [("40000", "docs", tree(sandbox.upstream,
                                                                              [("100644", "a.md", page)]))]))
    recorder = RecordingGit(tmp_path / "recorder")
    monkeypatch.setenv("PATH", f"{recorder.bin}:{os.environ['PATH']}")
    monkeypatch.setenv("GITEA_TOKEN", CANARY)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", CANARY)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))  # would redirect every command
    assert sandbox.sync(["docs"], log).changed
    calls = recorder.calls()
    assert len(calls) > 8
    for args, env in calls:
        assert "DAGSTER_PG_PASSWORD" not in env and "GIT_DIR=" not in env
        assert "core.hooksPath=/dev/null" in args and "protocol.allow=never" in args
        touches_target = str(sandbox.gitea) in " ".join(args)
        assert (CANARY in env) == touches_target, args  # the token header, towards the target only
        if any(arg.startswith("file://") and str(sandbox.upstream) in arg for arg in args):
            assert "transfer.fsckObjects=true" in args and "http.followRedirects=false" in args


def test_an_upstream_name_that_resolves_inward_is_refused_before_git_runs(
    sandbox: Sandbox, log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maintenance_jobs import upstream_urls
    from maintenance_jobs.executor_configs import ConfigRefused

    recorder = RecordingGit(tmp_path / "recorder")
    monkeypatch.setenv("PATH", f"{recorder.bin}:{os.environ['PATH']}")
    answers = {"docs.example.org": ["93.184.216.34"], "rebind.example.org": ["93.184.216.34", "127.0.0.1"],
               "meta.example.org": ["169.254.169.254"], "mapped.example.org": ["::ffff:10.0.0.1"]}
    monkeypatch.setattr(upstream_urls, "resolve", lambda host, port: answers[host])
    url = target_repo_url(f"file://{sandbox.gitea}", "library/docs-evil")

    def run(host: str):
        config = DocSyncConfig(project="evil", upstream_repo=f"https://{host}/org/repo.git", docs_paths=["docs"],
                               gitea_repo="library/docs-evil")
        return sync_docs(config, target_url=url, token=None, work_dir=sandbox.work, now=NOW, log=log)

    for host in ("rebind.example.org", "meta.example.org", "mapped.example.org"):
        with pytest.raises(ConfigRefused, match="resolves to a non-public address"):
            run(host)
    assert recorder.calls() == [] and not sandbox.work.exists()

    # A public answer: git is pinned to the address that was checked, and the failure is told in our words only.
    with pytest.raises(GitCommandError) as info:
        run("docs.example.org")
    fetch = next(args for args, _ in recorder.calls() if "fetch" in args)
    assert "http.curloptResolve=docs.example.org:443:93.184.216.34" in fetch
    assert str(info.value) == ("fetching upstream https://docs.example.org/org/repo.git (branch main) failed "
                               "(exit 128): the connection failed")


def test_the_fetch_and_the_docs_are_bounded_in_size(sandbox: Sandbox, log, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = sandbox.upstream
    noise = blob(repo, os.urandom(400_000))  # incompressible: 400 KB over the wire
    publish(repo, tree(repo, [("40000", "docs", tree(repo, [("100644", "big.bin", noise)]))]))
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES", "100000")
    with pytest.raises(GitCommandError, match="sent more than 100000 bytes"):
        sandbox.sync(["docs"], log)
    assert sandbox.target_files() == []

    zeros = blob(repo, bytes(5_000_000))  # a few KB over the wire, 5 MB as files
    publish(repo, tree(repo, [("40000", "docs", tree(repo, [("100644", "zeros.bin", zeros)]))]))
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES", "10000000")
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_MAX_DOCS_BYTES", "1000000")
    with pytest.raises(GitCommandError, match="5000000 bytes, over the limit of 1000000"):
        sandbox.sync(["docs"], log)
    assert sandbox.target_files() == []


def test_the_job_launched_with_a_hostile_upstream_fails_with_its_reason_and_runs_nothing(
    sandbox: Sandbox, marker: Path, tmp_path: Path
) -> None:
    """The same attack as the API or the webserver's launchRun would start it: the doc-sync job's op."""
    import dagster as dg

    from maintenance_jobs.jobs import doc_sync_executor_job
    from maintenance_jobs.resources import GiteaResource

    publish(sandbox.upstream, hook_through_symlink_tree(sandbox, marker, ".git/hooks"))
    run_config = {"ops": {"run_doc_sync_executor": {"config": sandbox.config([]).model_dump()}}}
    gitea = GiteaResource(base_url=f"file://{sandbox.gitea}", token=CANARY, work_dir=str(sandbox.work))
    with dg.instance_for_test() as instance:
        result = doc_sync_executor_job.execute_in_process(
            run_config=run_config, resources={"gitea": gitea}, instance=instance, raise_on_error=False,
            tags={"maintenance/task": "sync_evil_docs"},
        )
        tags = instance.get_run_by_id(result.run_id).tags
    assert not result.success
    assert tags["racing/outcome"] == "failed"
    assert tags["racing/error"].endswith("failed (exit 128): the upstream's objects failed git's integrity checks")
    assert not marker.exists() and sandbox.executable_files_in_work() == [] and sandbox.target_files() == []
