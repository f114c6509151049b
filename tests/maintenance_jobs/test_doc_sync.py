"""Doc sync with real git: local bare repositories, and an HTTP remote that requires a token (auth + scrubbing)."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from maintenance_jobs.executor_configs import DocSyncConfig
from maintenance_jobs.executor_configs import ConfigRefused
from maintenance_jobs.executors.doc_sync import (
    SYNC_INFO_FILE,
    Git,
    GitCommandError,
    RemoteAccess,
    _fetch_upstream,
    snapshot_tag,
    sync_docs,
    target_repo_url,
)
from maintenance_jobs.jobs import doc_sync_executor_job
from maintenance_jobs.resources import GiteaResource
from maintenance_jobs.tags import TAG_OUTPUT, TAG_TASK
from tests.maintenance_jobs.git_http_server import GitHttpServer

pytestmark = pytest.mark.executor

TOKEN = "gta_s3cr3t_token_value_0123456789"
WRONG_TOKEN = "gta_wrong_token_value_9876543210"
NOW = dt.datetime(2025, 6, 11, 4, 0, tzinfo=dt.UTC)


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(autouse=True)
def local_test_remotes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test repositories are file:// paths; production accepts https:// only (the test-only setting below).
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES", "file")


@pytest.fixture
def log() -> logging.Logger:
    logger = logging.getLogger(f"doc_sync_test_{id(object())}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(ListHandler())
    return logger


def log_lines(logger: logging.Logger) -> list[str]:
    return logger.handlers[0].lines


class Upstream:
    """A working repo pushed to a bare `upstream.git` (what GitHub would be)."""

    def __init__(self, root: Path) -> None:
        self.work = root / "upstream-work"
        self.bare = root / "upstream.git"
        git("init", "-q", "-b", "main", str(self.work))
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        self.write("docs/index.md", "# Docs\n")
        self.write("docs/guide/intro.md", "Intro\n")
        self.write("src/app.py", "print('app')\n")
        self.write("README.md", "readme\n")
        self.commit("initial")

    def write(self, path: str, text: str) -> None:
        target = self.work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, message: str) -> str:
        git("add", "-A", cwd=self.work)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", str(self.bare), "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path)


@pytest.fixture
def gitea_root(tmp_path: Path) -> Path:
    root = tmp_path / "gitea"
    git("init", "-q", "--bare", "-b", "main", str(root / "library" / "docs-fastapi.git"))
    return root


def config(upstream: Upstream, docs_paths: list[str] | None = None) -> DocSyncConfig:
    return DocSyncConfig(
        project="fastapi",
        upstream_repo=f"file://{upstream.bare}",
        docs_paths=["/docs"] if docs_paths is None else docs_paths,
        gitea_repo="library/docs-fastapi",
        branch="main",
        target_branch="main",
    )


def target_files(bare: Path, ref: str = "main") -> list[str]:
    return sorted(git("ls-tree", "-r", "--name-only", ref, cwd=bare).splitlines())


def test_sync_keeps_only_docs_writes_sync_info_and_tags(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    result = sync_docs(config(upstream), target_url=target, token=None, work_dir=tmp_path / "work", now=NOW, log=log)
    bare = gitea_root / "library" / "docs-fastapi.git"
    assert target_files(bare) == [SYNC_INFO_FILE, "docs/guide/intro.md", "docs/index.md"]
    assert result.changed and result.files == 2 and result.tag == "snapshot-2025-06-11"
    upstream_head = git("rev-parse", "HEAD", cwd=upstream.work)
    assert result.upstream_commit == upstream_head
    info = git("show", f"main:{SYNC_INFO_FILE}", cwd=bare)
    assert f"Commit: {upstream_head}" in info and "Paths: docs" in info and "Date: 2025-06-11" in info
    assert f"Upstream: file://{upstream.bare}" in info
    assert git("rev-parse", "snapshot-2025-06-11^{commit}", cwd=bare) == git("rev-parse", "main", cwd=bare)


def test_sync_is_idempotent_and_follows_upstream_changes(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    bare = gitea_root / "library" / "docs-fastapi.git"
    work = tmp_path / "work"
    first = sync_docs(config(upstream), target_url=target, token=None, work_dir=work, now=NOW, log=log)
    commits = git("rev-list", "--count", "main", cwd=bare)

    again = sync_docs(config(upstream), target_url=target, token=None, work_dir=work, now=NOW, log=log)
    assert not again.changed and again.target_commit == first.target_commit and again.tag is None
    # A change outside the mirrored paths is not a docs change either.
    upstream.write("src/app.py", "print('v2')\n")
    upstream.commit("code only")
    later = NOW + dt.timedelta(days=31)
    quiet = sync_docs(config(upstream), target_url=target, token=None, work_dir=work, now=later, log=log)
    assert not quiet.changed and git("rev-list", "--count", "main", cwd=bare) == commits

    upstream.write("docs/index.md", "# Docs v2\n")
    upstream.write("docs/guide/intro.md", "")  # emptied, still present
    (upstream.work / "docs" / "guide" / "intro.md").unlink()
    new_head = upstream.commit("docs change")
    changed = sync_docs(config(upstream), target_url=target, token=None, work_dir=work, now=later, log=log)
    assert changed.changed and changed.tag == "snapshot-2025-07-12"
    assert target_files(bare) == [SYNC_INFO_FILE, "docs/index.md"]  # the deleted page is gone from the mirror
    assert git("show", "main:docs/index.md", cwd=bare) == "# Docs v2"
    assert f"Commit: {new_head}" in git("show", f"main:{SYNC_INFO_FILE}", cwd=bare)
    assert git("tag", "--list", cwd=bare).split() == ["snapshot-2025-06-11", "snapshot-2025-07-12"]


def test_whole_repository_when_no_docs_paths(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    result = sync_docs(config(upstream, []), target_url=target, token=None, work_dir=tmp_path / "w", now=NOW, log=log)
    assert result.files == 4
    assert target_files(gitea_root / "library" / "docs-fastapi.git") == [
        SYNC_INFO_FILE, "README.md", "docs/guide/intro.md", "docs/index.md", "src/app.py"
    ]


def test_missing_docs_path_fails_clearly(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    with pytest.raises(GitCommandError, match="nope"):
        sync_docs(config(upstream, ["nope"]), target_url=target, token=None, work_dir=tmp_path / "w", now=NOW, log=log)
    assert git("branch", "--list", cwd=gitea_root / "library" / "docs-fastapi.git") == ""  # nothing pushed


def test_http_remote_with_token_pushes_and_never_leaks_it(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    with GitHttpServer(gitea_root, TOKEN) as server:
        target = target_repo_url(server.base_url, "library/docs-fastapi")
        result = sync_docs(config(upstream), target_url=target, token=TOKEN, work_dir=tmp_path / "w", now=NOW, log=log)
    assert result.changed
    assert target_files(gitea_root / "library" / "docs-fastapi.git") == [SYNC_INFO_FILE, "docs/guide/intro.md", "docs/index.md"]
    # Auth travelled as a header on every request, never in a URL, and nothing logged it.
    assert server.auth_headers_seen and set(server.auth_headers_seen) == {f"token {TOKEN}"}
    assert server.requests_with_token_in_url == 0
    assert log_lines(log) and not any(TOKEN in line for line in log_lines(log))


def test_http_remote_with_wrong_token_fails_with_a_scrubbed_message(
    upstream: Upstream, gitea_root: Path, tmp_path: Path, log
) -> None:
    with GitHttpServer(gitea_root, TOKEN) as server:
        target = target_repo_url(server.base_url, "library/docs-fastapi")
        with pytest.raises(GitCommandError) as info:
            sync_docs(config(upstream), target_url=target, token=WRONG_TOKEN, work_dir=tmp_path / "w", now=NOW, log=log)
    message = str(info.value)
    assert WRONG_TOKEN not in message and TOKEN not in message
    assert "reading the target" in message and server.base_url in message  # says what failed, and where
    assert "authentication was refused" in message and "\n" not in message  # one line, in our words
    assert set(server.auth_headers_seen) == {f"token {WRONG_TOKEN}"}
    assert not any(WRONG_TOKEN in line for line in log_lines(log))


@pytest.mark.parametrize(
    ("now", "tag"),
    [
        (NOW, "snapshot-2025-06-11"),
        # Auckland is already on the 12th, UTC still on the 11th: the UTC date names the snapshot.
        (dt.datetime(2025, 6, 12, 9, 30, tzinfo=ZoneInfo("Pacific/Auckland")), "snapshot-2025-06-11"),
        # UTC-12 is still on the 10th, UTC already on the 11th.
        (dt.datetime(2025, 6, 10, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=-12))), "snapshot-2025-06-11"),
    ],
)
def test_snapshot_tag_is_the_utc_date_of_the_instant(now: dt.datetime, tag: str) -> None:
    assert snapshot_tag(now) == tag


def test_snapshot_tag_refuses_a_naive_time() -> None:
    # A naive time would be read in the machine's local zone, so the tag would depend on the machine.
    with pytest.raises(ValueError, match="timezone-aware"):
        snapshot_tag(dt.datetime(2025, 6, 11, 4, 0))


def _all_event_text(instance: dg.DagsterInstance, run_id: str) -> str:
    return "\n".join(str(entry) for entry in instance.all_logs(run_id))


@pytest.mark.parametrize("token", [TOKEN, WRONG_TOKEN])
def test_op_metadata_tags_and_events_are_free_of_the_token(
    upstream: Upstream, gitea_root: Path, tmp_path: Path, token: str
) -> None:
    run_config = {"ops": {"run_doc_sync_executor": {"config": config(upstream).model_dump()}}}
    # The op reads the real clock; the tag is named by the UTC date of that moment (never the machine's local date),
    # which lies between these two readings even when the run crosses midnight UTC.
    utc_days_around_run = {dt.datetime.now(dt.UTC).date()}
    with GitHttpServer(gitea_root, TOKEN) as server, dg.instance_for_test() as instance:
        gitea = GiteaResource(base_url=server.base_url, token=token, work_dir=str(tmp_path / "w"))
        result = doc_sync_executor_job.execute_in_process(
            run_config=run_config,
            resources={"gitea": gitea},
            instance=instance,
            tags={TAG_TASK: "sync_fastapi_docs_monthly"},
            raise_on_error=False,
        )
        text = _all_event_text(instance, result.run_id)
        tags = instance.get_run_by_id(result.run_id).tags
    utc_days_around_run.add(dt.datetime.now(dt.UTC).date())
    assert token not in text and token not in str(tags)
    if token == TOKEN:
        assert result.success
        metadata = result.output_for_node("run_doc_sync_executor")
        assert "synced 2 files" in metadata
        step_output = next(e for e in result.all_events if e.event_type_value == "STEP_OUTPUT")
        values = step_output.event_specific_data.metadata
        assert values["changed"].value is True and len(values["upstream_commit"].value) == 40
        assert values["snapshot_tag"].value in {f"snapshot-{day.isoformat()}" for day in utc_days_around_run}
        assert "synced 2 files" in tags[TAG_OUTPUT] and tags["racing/outcome"] == "success"
    else:
        assert not result.success
        assert tags["racing/outcome"] == "failed" and "authentication was refused" in tags["racing/error"]


def _unchecked(upstream: Upstream, **changes) -> DocSyncConfig:
    """A config as a row written before the rules (or under another environment) would hold it: not validated."""
    return DocSyncConfig.model_construct(**{**config(upstream).model_dump(), **changes})


def test_upload_pack_option_in_upstream_runs_nothing(upstream: Upstream, gitea_root: Path, tmp_path: Path, log) -> None:
    marker = tmp_path / "pwned"
    evil = f"--upload-pack=touch {marker}"
    with pytest.raises(Exception):
        DocSyncConfig(**{**config(upstream).model_dump(), "upstream_repo": evil})
    # The executor checks again at run time: refused before any git command.
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    with pytest.raises(ConfigRefused, match="upstream_repo"):
        sync_docs(_unchecked(upstream, upstream_repo=evil), target_url=target, token=None, work_dir=tmp_path / "w",
                  now=NOW, log=log)
    assert not marker.exists()
    # And git itself gets `--` before the repository: even unchecked, the value is a (bad) repository, not an option.
    with pytest.raises(GitCommandError):
        hermetic = Git(None, log, tmp_path, upstream=RemoteAccess("file"), target=RemoteAccess("file"))
        cache = tmp_path / "cache.git"
        git("init", "-q", "--bare", str(cache))
        _fetch_upstream(hermetic, cache, _unchecked(upstream, upstream_repo=evil), 10**6)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("branch", "--upload-pack=x"), ("target_branch", "-D"), ("docs_paths", ["--output=/tmp/x"]),
     ("gitea_repo", "-x/y")],
)
def test_run_time_check_covers_every_git_facing_field(upstream: Upstream, tmp_path: Path, log, key, value) -> None:
    with pytest.raises(ConfigRefused, match=key):
        sync_docs(_unchecked(upstream, **{key: value}), target_url="file:///nonexistent", token=None,
                  work_dir=tmp_path / "w", now=NOW, log=log)
    assert not (tmp_path / "w").exists()  # nothing fetched, nothing created


def test_local_upstreams_are_refused_at_run_time_without_the_test_setting(
    upstream: Upstream, gitea_root: Path, tmp_path: Path, log, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = target_repo_url(f"file://{gitea_root}", "library/docs-fastapi")
    rows = [_unchecked(upstream, upstream_repo=local) for local in (f"file://{upstream.bare}", str(upstream.bare))]
    monkeypatch.delenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES")
    for row in rows:
        with pytest.raises(ConfigRefused, match="https"):
            sync_docs(row, target_url=target, token=None, work_dir=tmp_path / "w", now=NOW, log=log)
    assert git("branch", "--list", cwd=gitea_root / "library" / "docs-fastapi.git") == ""


def test_the_run_fails_when_its_worker_refuses_the_config(
    upstream: Upstream, gitea_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_config = {"ops": {"run_doc_sync_executor": {"config": config(upstream).model_dump()}}}
    monkeypatch.delenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES")  # the run worker's environment refuses file://
    with dg.instance_for_test() as instance:
        gitea = GiteaResource(base_url=f"file://{gitea_root}", token=None, work_dir=str(tmp_path / "w"))
        result = doc_sync_executor_job.execute_in_process(
            run_config=run_config, resources={"gitea": gitea}, instance=instance, raise_on_error=False
        )
    assert not result.success
    assert git("branch", "--list", cwd=gitea_root / "library" / "docs-fastapi.git") == ""


@pytest.mark.parametrize("base", ["https://bot:s3cret@gitea.example", "http://token@gitea:3000"])
def test_a_gitea_url_carrying_credentials_is_refused(base: str) -> None:
    # The token is its own setting (GITEA_TOKEN, sent as a header); a URL with userinfo would copy it into run
    # configs and messages.
    with pytest.raises(ConfigRefused, match="GITEA_TOKEN"):
        target_repo_url(base, "library/docs")


@pytest.mark.parametrize("base", [
    "ext::sh -c touch% /tmp/pwned;#",  # git runs ext:: remotes as commands
    "EXT::sh -c id",
    "fd::3",
    "ssh://git@gitea.example/x",
    "git://gitea.example",
    "/srv/git",  # a bare path: git reads this machine's disk
    "gitea.example:library",  # scp-style: ssh
    "http:///library",  # no host
    "https://",
    "",
])
def test_a_gitea_url_git_would_not_reach_over_http_is_refused(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES")
    with pytest.raises(ConfigRefused, match="GITEA_URL"):
        target_repo_url(base, "library/docs")


@pytest.mark.parametrize(("base", "test_schemes", "url"), [
    ("http://gitea:3000", "", "http://gitea:3000/library/docs.git"),
    ("https://gitea.example/", "", "https://gitea.example/library/docs.git"),
    ("HTTPS://gitea.example", "", "HTTPS://gitea.example/library/docs.git"),
    ("file:///srv/gitea", "file", "file:///srv/gitea/library/docs.git"),  # the suite's local targets only
])
def test_http_gitea_urls_are_accepted(base: str, test_schemes: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES", test_schemes)
    assert target_repo_url(base, "library/docs") == url


def test_a_file_gitea_url_is_refused_without_the_test_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAINTENANCE_DOC_SYNC_TEST_SCHEMES")
    with pytest.raises(ConfigRefused, match="scheme 'file' refused"):
        target_repo_url("file:///srv/gitea", "library/docs")
