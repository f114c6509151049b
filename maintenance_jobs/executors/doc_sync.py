"""doc_sync_executor: mirror an upstream repository's docs into a Gitea repository with real git.

The token travels as an `Authorization: token …` header set through git's environment config (never in the URL or
the command line), only to the target; every message that leaves this module is scrubbed of it.
A sync is idempotent: when the mirrored files are unchanged, nothing is committed, tagged or pushed.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from maintenance_jobs.executor_configs import DocSyncConfig, check_doc_sync_config
from maintenance_jobs.executors.scrub import scrub

SYNC_INFO_FILE = ".SYNC_INFO.md"
_AUTHOR = ["-c", "user.name=maintenance-jobs", "-c", "user.email=maintenance-jobs@localhost"]
_GIT_TIMEOUT_SECONDS = 900


class GitCommandError(RuntimeError):
    """A git command failed; the message is already scrubbed of credentials."""


@dataclass(frozen=True)
class DocSyncResult:
    project: str
    upstream_commit: str
    target_commit: str
    changed: bool
    files: int
    tag: str | None
    paths: tuple[str, ...]

    @property
    def message(self) -> str:
        if not self.changed:
            return f"{self.project}: docs unchanged at upstream {self.upstream_commit[:12]}"
        return f"{self.project}: synced {self.files} files from {self.upstream_commit[:12]}, tagged {self.tag}"


def target_repo_url(base_url: str, gitea_repo: str) -> str:
    """The clone URL of `owner/name` on a Gitea server (`http://gitea:3000` → `http://gitea:3000/owner/name.git`)."""
    return f"{base_url.rstrip('/')}/{gitea_repo}.git"


class Git:
    """Runs git hermetically (no user or system config, no prompts) and scrubs everything it reports."""

    def __init__(self, token: str | None, log: logging.Logger | logging.LoggerAdapter) -> None:
        self._token = token or None
        self._log = log
        self._env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_COUNT": "0",
        }

    def scrub(self, text: str) -> str:
        return scrub(text, [self._token])

    def __call__(self, *args: str, cwd: Path | None = None, auth: bool = False, stdout_bytes: bool = False):
        env = dict(self._env)
        if auth and self._token:
            env.update(
                GIT_CONFIG_COUNT="1",
                GIT_CONFIG_KEY_0="http.extraHeader",
                GIT_CONFIG_VALUE_0=f"Authorization: token {self._token}",
            )
        shown = self.scrub(" ".join(args))
        self._log.debug(f"git {shown}")
        try:
            done = subprocess.run(
                ["git", *args], cwd=cwd, env=env, capture_output=True, timeout=_GIT_TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            raise GitCommandError(f"git {shown} timed out after {_GIT_TIMEOUT_SECONDS}s") from None
        if done.returncode != 0:
            stderr = self.scrub(done.stderr.decode(errors="replace").strip())
            raise GitCommandError(f"git {shown} failed (exit {done.returncode}): {stderr}")
        return done.stdout if stdout_bytes else done.stdout.decode().strip()


def _remote_has_branch(git: Git, url: str, branch: str) -> bool:
    return bool(git("ls-remote", "--heads", "--", url, f"refs/heads/{branch}", auth=True))


def _fetch_upstream(git: Git, upstream: Path, config: DocSyncConfig) -> str:
    if not (upstream / "HEAD").exists():
        upstream.mkdir(parents=True, exist_ok=True)
        git("init", "--bare", "-q", "--", str(upstream))
    ref = f"refs/remotes/upstream/{config.branch}"
    # Only the tip is mirrored, so a shallow fetch is enough (and keeps big upstreams cheap).
    git("fetch", "-q", "--depth=1", "--no-tags", "--", config.upstream_repo, f"+refs/heads/{config.branch}:{ref}",
        cwd=upstream)
    return git("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}", cwd=upstream)


def _checkout_target(git: Git, checkout: Path, url: str, branch: str) -> bool:
    """Reset the cached checkout to the target branch; False when the target has no such branch yet."""
    exists = _remote_has_branch(git, url, branch)
    if checkout.exists() and not exists:
        shutil.rmtree(checkout)
    if not checkout.exists():
        checkout.mkdir(parents=True)
        git("init", "-q", "-b", branch, cwd=checkout)
    if exists:
        git("fetch", "-q", "--no-tags", "--", url, f"+refs/heads/{branch}:refs/remotes/target/{branch}", cwd=checkout,
            auth=True)
        git("checkout", "-q", "-f", "-B", branch, f"refs/remotes/target/{branch}", cwd=checkout)
    return exists


def _replace_tree(git: Git, upstream: Path, commit: str, paths: tuple[str, ...], checkout: Path) -> int:
    """Replace the checkout's files with `paths` of the upstream commit; returns the number of files."""
    for entry in checkout.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    archive = git("archive", "--format=tar", commit, "--", *paths, cwd=upstream, stdout_bytes=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(checkout, filter="data")
        return sum(1 for member in tar.getmembers() if member.isfile())


def snapshot_tag(now: dt.datetime) -> str:
    """The tag of `now`'s snapshot, named by its UTC date: the same instant gets the same tag on every machine and
    from every caller, whatever their local zone (a naive time has no instant, so it is refused)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"snapshot time must be timezone-aware, got {now!r}")
    return f"snapshot-{now.astimezone(dt.UTC).date().isoformat()}"


def sync_info(config: DocSyncConfig, commit: str, synced_at: dt.datetime, git: Git) -> str:
    paths = ", ".join(config.docs_paths) if config.docs_paths else "(whole repository)"
    return (
        f"# Sync info\n\n"
        f"- Upstream: {git.scrub(config.upstream_repo)}\n"
        f"- Branch: {config.branch}\n"
        f"- Commit: {commit}\n"
        f"- Date: {synced_at.isoformat(timespec='seconds')}\n"
        f"- Paths: {paths}\n"
    )


def sync_docs(
    config: DocSyncConfig,
    *,
    target_url: str,
    token: str | None,
    work_dir: Path,
    now: dt.datetime,
    log: logging.Logger | logging.LoggerAdapter,
) -> DocSyncResult:
    """Fetch upstream, keep `docs_paths`, commit with `.SYNC_INFO.md`, push and tag `snapshot-YYYY-MM-DD` (UTC date).

    The config is checked again here (ConfigRefused) under this process's settings before any git command runs.
    """
    config = check_doc_sync_config(config)
    git = Git(token, log)
    cache = work_dir / "doc_sync" / config.project
    upstream_commit = _fetch_upstream(git, cache / "upstream.git", config)
    checkout = cache / "target"
    had_branch = _checkout_target(git, checkout, target_url, config.target_branch)
    paths = tuple(config.docs_paths)
    files = _replace_tree(git, cache / "upstream.git", upstream_commit, paths, checkout)
    git("add", "-A", cwd=checkout)
    if had_branch:
        unchanged = subprocess.run(
            ["git", "diff", "--cached", "--quiet", "HEAD", "--", ".", f":(exclude){SYNC_INFO_FILE}"],
            cwd=checkout,
            env=git._env,
            check=False,
        ).returncode == 0
        if unchanged:
            git("reset", "-q", "--hard", "HEAD", cwd=checkout)
            head = git("rev-parse", "HEAD", cwd=checkout)
            log.info(f"{config.project}: nothing changed since the last sync")
            return DocSyncResult(config.project, upstream_commit, head, False, files, None, paths)
    (checkout / SYNC_INFO_FILE).write_text(sync_info(config, upstream_commit, now, git))
    git("add", "-A", cwd=checkout)
    message = f"Sync {config.project} docs from {git.scrub(config.upstream_repo)} @ {upstream_commit[:12]}"
    git(*_AUTHOR, "commit", "-q", "-m", message, cwd=checkout)
    head = git("rev-parse", "HEAD", cwd=checkout)
    git("push", "-q", "--", target_url, f"HEAD:refs/heads/{config.target_branch}", cwd=checkout, auth=True)
    # One snapshot per (UTC) day: a second sync on the same day moves that day's tag to the newer commit.
    tag = snapshot_tag(now)
    git(*_AUTHOR, "tag", "-f", "-a", tag, "-m", f"Snapshot of {config.project} docs {tag.removeprefix('snapshot-')}", cwd=checkout)
    git("push", "-q", "-f", "--", target_url, f"refs/tags/{tag}", cwd=checkout, auth=True)
    log.info(f"{config.project}: pushed {head[:12]} ({files} files) and tag {tag}")
    return DocSyncResult(config.project, upstream_commit, head, True, files, tag, paths)
