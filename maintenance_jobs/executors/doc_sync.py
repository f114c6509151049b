"""doc_sync_executor: mirror an upstream repository's docs into a Gitea repository with real git.

Upstream content is data. The mirror is built from git objects with plumbing only (`ls-tree`, `update-index`,
`write-tree`, `commit-tree`) in one bare repository per project: no upstream file is ever written to disk, so a
crafted tree cannot pass through a symlink into `.git`, and there is no work tree whose hooks or attributes could
run. Every git command runs hermetically:
- a clean environment (no secrets of the worker, a scratch HOME, no system or global config), with the Gitea token
  only in the environment of the commands that talk to the target, as an `Authorization: token …` header;
- command-line config that disables hooks, fsmonitor and credential helpers, allows only the protocols that remote
  needs, checks every fetched object (`transfer.fsckObjects`) and never follows an upstream's redirect;
- the upstream host resolved and checked (public addresses only) just before the fetch, and git pinned to those
  addresses, so a name that re-resolves inward in between is never reached;
- a cache whose layout or config is not exactly what this module writes is deleted and rebuilt, never trusted.
Upstream symlinks and submodules are left out of the mirror and reported; any path with a `.git` component, or more
bytes than the settings allow, fails the run. Errors say what failed in one line and never relay an upstream's
answers. A sync is idempotent: when the mirrored files are unchanged, nothing is committed, tagged or pushed.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from maintenance_jobs import settings
from maintenance_jobs.executor_configs import ConfigRefused, DocSyncConfig, check_doc_sync_config
from maintenance_jobs.executors.scrub import scrub
from maintenance_jobs.upstream_urls import AddressRefused, PinnedHost, pin_public_host

SYNC_INFO_FILE = ".SYNC_INFO.md"
AUTHOR_NAME = "maintenance-jobs"
AUTHOR_EMAIL = "maintenance-jobs@localhost"
_GIT_TIMEOUT_SECONDS = 900
_SIZE_POLL_SECONDS = 0.2
MIRROR_REPO = "mirror.git"
# Exactly what `git init --bare --template=` writes; a cache whose config differs was changed by someone else.
CANONICAL_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
# What a bare repository of this module may hold at its top level (all written by git itself).
_CACHE_ENTRIES = frozenset({"HEAD", "config", "objects", "refs", "packed-refs", "shallow", "FETCH_HEAD"})
# Passed through to git: where to find programs and how to reach the internet; never the worker's secrets.
_PASSED_ENV = ("PATH", "TMPDIR", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
               "ALL_PROXY", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE")
# On every git command: nothing from a repository's config or content may run a program or widen what git does.
_HERMETIC_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.symlinks=false",
    "core.askPass=",
    "credential.helper=",
    "transfer.fsckObjects=true",
    "fetch.fsckObjects=true",
    "receive.fsckObjects=true",
    # Warnings by default; errors here: a path git would refuse to check out is refused on the way in.
    "fetch.fsck.hasDotgit=error",
    "fetch.fsck.hasDotdot=error",
    "fetch.fsck.hasDot=error",
    "fetch.fsck.fullPathname=error",
    "fetch.fsck.badFilemode=error",
    "fetch.unpackLimit=1",  # one pack per fetch: the size bound watches one growing file
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
)
_MODE_FILE = ("100644", "100755")
_MODE_SYMLINK = "120000"
_MODE_SUBMODULE = "160000"


class GitCommandError(RuntimeError):
    """A git command failed; the message is one line, scrubbed of credentials, with no remote's answer in it."""


class Remote(Enum):
    NONE = "none"  # local plumbing: no network at all
    UPSTREAM = "upstream"  # untrusted: anonymous, https only, pinned, no redirects, size-bounded
    TARGET = "target"  # the Gitea server of the settings: the token goes here only


@dataclass(frozen=True)
class DocSyncResult:
    project: str
    upstream_commit: str
    target_commit: str
    changed: bool
    files: int
    tag: str | None
    paths: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # "path (symlink)", "path (submodule)": upstream entries left out of the mirror

    @property
    def message(self) -> str:
        if not self.changed:
            text = f"{self.project}: docs unchanged at upstream {self.upstream_commit[:12]}"
        else:
            text = f"{self.project}: synced {self.files} files from {self.upstream_commit[:12]}, tagged {self.tag}"
        if self.skipped:
            text += f"; left out {len(self.skipped)} entries: {', '.join(self.skipped[:5])}"
            text += ", …" if len(self.skipped) > 5 else ""
        return text


def target_repo_url(base_url: str, gitea_repo: str) -> str:
    """The clone URL of `owner/name` on a Gitea server (`http://gitea:3000` → `http://gitea:3000/owner/name.git`).

    The token is a setting of its own; a base URL carrying credentials is refused rather than copied into run
    configs and messages. The scheme is http(s): git would run `ext::<command>` as a command and read `file://` or a
    bare path from this machine's disk, with the token in its environment (`file` is accepted only under the
    test-only MAINTENANCE_DOC_SYNC_TEST_SCHEMES, for the suite's local targets)."""
    if not base_url:
        raise ConfigRefused("GITEA_URL is not set: doc sync needs the Gitea server's URL (see .env.example)")
    parts = urlsplit(base_url)
    allowed = {"http", "https"} | (settings.doc_sync_test_schemes() & {"file"})
    scheme = parts.scheme.lower()
    if scheme not in allowed or "::" in base_url or (scheme != "file" and not parts.hostname):
        # urlsplit keeps a scheme to letters, digits, '+', '-' and '.': quoting it shows nothing of the setting.
        raise ConfigRefused(f"GITEA_URL must be an http:// or https:// URL of the Gitea server "
                            f"(scheme {scheme or 'none'!r} refused)")
    if "@" in parts.netloc:
        raise ConfigRefused("GITEA_URL must not contain credentials (user:password@); set GITEA_TOKEN instead")
    return f"{base_url.rstrip('/')}/{gitea_repo}.git"


# --- Error messages: one line, a fixed vocabulary, never the remote's own words ------------------------------------

_FAILURE_KINDS = (
    (re.compile(r"fsck|index-pack failed|did not send all necessary objects|bad object|badTree|duplicate", re.I),
     "the upstream's objects failed git's integrity checks"),
    (re.compile(r"could not resolve host|name or service not known", re.I), "the host name was not found"),
    (re.compile(r"timed out|timeout", re.I), "the connection timed out"),
    (re.compile(r"ssl|tls|certificate|gnutls", re.I), "the TLS connection failed"),
    (re.compile(r"failed to connect|connection refused|couldn't connect|network is unreachable", re.I),
     "the connection failed"),
    (re.compile(r"returned error: 40[13]|authentication failed|could not read username|unauthorized", re.I),
     "authentication was refused"),
    (re.compile(r"couldn't find remote ref|not found|does not appear to be a git repository|returned error: 404",
                re.I), "the repository or branch was not found"),
    (re.compile(r"non-fast-forward|\[rejected\]|fetch first", re.I), "the push was rejected (the branch moved)"),
    (re.compile(r"transport .* not allowed|unsupported protocol", re.I), "the protocol is not allowed"),
)


def failure_kind(stderr: str) -> str:
    """What went wrong, in this module's words (the remote's text is never passed on)."""
    for pattern, kind in _FAILURE_KINDS:
        if pattern.search(stderr):
            return kind
    return "git reported an error"


# --- Running git --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteAccess:
    """What one remote may use: its URL's scheme and, for the upstream, the pinned addresses."""

    scheme: str
    pinned: PinnedHost | None = None


class Git:
    """Runs git hermetically (see the module doc) and reports failures in one scrubbed line."""

    def __init__(self, token: str | None, log: logging.Logger | logging.LoggerAdapter, home: Path,
                 upstream: RemoteAccess, target: RemoteAccess) -> None:
        self._token = token or None
        self._log = log
        self._access = {Remote.UPSTREAM: upstream, Remote.TARGET: target}
        self._env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
        self._env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ATTR_NOSYSTEM="1",
            GIT_NO_REPLACE_OBJECTS="1",
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_COUNT="0",
            LC_ALL="C",
            LANG="C",
            TZ="UTC",
        )
        self._env.setdefault("PATH", os.defpath)

    def scrub(self, text: str) -> str:
        return scrub(text, [self._token])

    def environment(self, remote: Remote, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(self._env, **(extra or {}))
        if remote is Remote.TARGET and self._token:
            env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.extraHeader",
                       GIT_CONFIG_VALUE_0=f"Authorization: token {self._token}")
        return env

    def config_args(self, remote: Remote) -> list[str]:
        config = list(_HERMETIC_CONFIG)
        access = self._access.get(remote)
        if access is not None:
            config.append(f"protocol.{access.scheme}.allow=always")
        if remote is Remote.UPSTREAM:
            config.append("http.followRedirects=false")  # a redirect could lead to an address never checked
            if access is not None and access.pinned is not None:
                config.append(f"http.curloptResolve={access.pinned.curl_resolve}")
        return [arg for item in config for arg in ("-c", item)]

    def __call__(self, *args: str, cwd: Path | None = None, remote: Remote = Remote.NONE, what: str = "",
                 stdin: bytes | None = None, env: dict[str, str] | None = None,
                 size_limit: tuple[Path, int] | None = None) -> str:
        shown = self.scrub(" ".join(args))
        self._log.debug(f"git {shown}")
        argv = ["git", *self.config_args(remote), *args]
        label = what or f"git {args[0]}"
        try:
            code, out, err = _run(argv, cwd, self.environment(remote, env), stdin, size_limit)
        except subprocess.TimeoutExpired:
            raise GitCommandError(f"{label} timed out after {_GIT_TIMEOUT_SECONDS}s") from None
        except SizeLimitExceeded as exc:
            raise GitCommandError(f"{label} was stopped: {exc}") from None
        if code != 0:
            text = err.decode(errors="replace")
            if remote is not Remote.UPSTREAM:
                # Local and target failures are the operator's own systems: the scrubbed text goes to the run log.
                self._log.warning(f"git {shown} failed (exit {code}): {self.scrub(text)[-2000:]}")
            raise GitCommandError(f"{label} failed (exit {code}): {failure_kind(text)}")
        return out.decode(errors="replace").strip()


class SizeLimitExceeded(RuntimeError):
    pass


def _tree_bytes(root: Path) -> int:
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                continue  # git renames its temporary files as it goes
    return total


def _run(argv: list[str], cwd: Path | None, env: dict[str, str], stdin: bytes | None,
         size_limit: tuple[Path, int] | None) -> tuple[int, bytes, bytes]:
    """Run `argv` in its own process group; stop it when `size_limit`'s folder grows past its bytes."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None else
                               subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + _GIT_TIMEOUT_SECONDS
    feed = stdin
    start_size = _tree_bytes(size_limit[0]) if size_limit else 0

    def check_size() -> None:
        folder, limit = size_limit  # type: ignore[misc]
        if _tree_bytes(folder) - start_size > limit:
            raise SizeLimitExceeded(f"the upstream sent more than {limit} bytes (MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES)")

    try:
        while True:
            wait = _SIZE_POLL_SECONDS if size_limit else max(0.0, deadline - time.monotonic())
            try:
                out, err = process.communicate(feed, timeout=wait)
            except subprocess.TimeoutExpired:
                feed = None  # communicate keeps what it already sent and read
                if time.monotonic() >= deadline:
                    raise
                check_size()
                continue
            if size_limit:
                check_size()  # a fetch can finish between two looks
            return process.returncode, out, err
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


# --- The cache: one bare repository per project, rebuilt whenever it is not exactly ours ---------------------------


def cache_problem(repo: Path) -> str | None:
    """Why `repo` cannot be trusted as this module's cache, or None: an unexpected top-level entry (hooks, info,
    a work tree of an older layout), a config other than the canonical one, alternates, or any symlink or special
    file anywhere inside."""
    if repo.is_symlink() or not repo.is_dir():
        return "not a directory"
    extra = sorted(entry.name for entry in repo.iterdir() if entry.name not in _CACHE_ENTRIES)
    if extra:
        return f"unexpected entries {extra[:3]}"
    config = repo / "config"
    if config.is_symlink() or not config.is_file() or config.read_text(errors="replace") != CANONICAL_CONFIG:
        return "config differs from the canonical one"
    info = repo / "objects" / "info"
    if info.is_dir() and any(info.iterdir()):
        return "objects/info is not empty (alternates?)"
    for directory, dirnames, filenames in os.walk(repo):
        for name in [*dirnames, *filenames]:
            mode = os.lstat(os.path.join(directory, name)).st_mode
            plain = stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and not mode & 0o111)
            if not plain:
                return f"unexpected file {os.path.relpath(os.path.join(directory, name), repo)}"
    return None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def prepare_cache(project_dir: Path, git: Git, log: logging.Logger | logging.LoggerAdapter) -> Path:
    """The project's bare repository, rebuilt (with a warning) unless it is exactly what this module writes."""
    repo = project_dir / MIRROR_REPO
    if project_dir.is_symlink() or (project_dir.exists() and not project_dir.is_dir()):
        log.warning(f"doc sync cache {project_dir} is not a plain folder: rebuilt")
        _remove(project_dir)
    if project_dir.is_dir():
        others = [entry.name for entry in project_dir.iterdir() if entry.name != MIRROR_REPO]
        problem = f"unexpected entries {sorted(others)[:3]}" if others else None
        if problem is None and repo.exists():
            problem = cache_problem(repo)
        if problem is not None:
            log.warning(f"doc sync cache {project_dir} was not as left ({problem}): rebuilt")
            _remove(project_dir)
    if not repo.exists():
        project_dir.mkdir(parents=True, exist_ok=True)
        git("init", "-q", "--bare", "--template=", "--", str(repo), what="creating the cache")
        (repo / "config").write_text(CANONICAL_CONFIG)
    return repo


@contextmanager
def project_lock(work_dir: Path, project: str) -> Iterator[None]:
    """One sync per project at a time: two tasks mirroring the same project share its cache."""
    work_dir.mkdir(parents=True, exist_ok=True)
    with open(work_dir / f"{project}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- Building the mirror from objects ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    oid: str
    size: int
    path: str


def _has_git_component(path: str) -> bool:
    # `.git` in any case, and the forms other file systems read as `.git` (trailing dots/spaces, `git~1`).
    return any(part.lower().rstrip(". ") in (".git", "git~1") for part in PurePosixPath(path).parts)


def list_entries(git: Git, repo: Path, commit: str, paths: tuple[str, ...]) -> list[TreeEntry]:
    """Every entry under `paths` of `commit` (all of it when empty), recursively, with blob sizes."""
    for path in paths:
        try:
            git("cat-file", "-e", f"{commit}:{path}", cwd=repo, what=f"finding docs path {path!r} upstream")
        except GitCommandError:
            raise GitCommandError(f"docs path {path!r} does not exist in the upstream commit {commit[:12]}") from None
    out = git("ls-tree", "-r", "-l", "-z", "--full-tree", commit, "--", *paths, cwd=repo, what="listing upstream")
    entries = []
    for record in filter(None, out.split("\0")):
        meta, path = record.split("\t", 1)
        mode, _kind, oid, size = meta.split()
        entries.append(TreeEntry(mode, oid, int(size) if size.isdigit() else 0, path))
    return entries


def select_docs(entries: list[TreeEntry], max_bytes: int) -> tuple[list[TreeEntry], list[str]]:
    """The regular files to mirror and the entries left out; GitCommandError for a `.git` path or too many bytes."""
    kept, skipped = [], []
    for entry in entries:
        if _has_git_component(entry.path):
            raise GitCommandError(f"the upstream tree has a path with a .git component ({entry.path[:200]!r}): "
                                  "refused")
        if entry.path == SYNC_INFO_FILE:
            skipped.append(f"{SYNC_INFO_FILE} (written by the sync)")
        elif entry.mode == _MODE_SYMLINK:
            skipped.append(f"{entry.path} (symlink)")
        elif entry.mode == _MODE_SUBMODULE:
            skipped.append(f"{entry.path} (submodule)")
        elif entry.mode in _MODE_FILE:
            kept.append(entry)
        else:
            skipped.append(f"{entry.path} (mode {entry.mode})")
    total = sum(entry.size for entry in kept)
    if total > max_bytes:
        raise GitCommandError(f"the docs hold {total} bytes, over the limit of {max_bytes} "
                              "(MAINTENANCE_DOC_SYNC_MAX_DOCS_BYTES)")
    return kept, skipped


def _index_info(entries: list[TreeEntry]) -> bytes:
    return b"".join(f"{e.mode} {e.oid}\t{e.path}".encode() + b"\0" for e in entries)


def write_tree(git: Git, repo: Path, entries: list[TreeEntry], scratch: Path) -> str:
    """The tree object of exactly `entries`, built in a scratch index (no work tree)."""
    index = scratch / "index"
    index.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(index)}
    git("update-index", "--add", "-z", "--index-info", cwd=repo, stdin=_index_info(entries), env=env,
        what="building the mirror tree")
    return git("write-tree", cwd=repo, env=env, what="building the mirror tree")


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


def _identity(now: dt.datetime) -> dict[str, str]:
    stamp = f"{int(now.timestamp())} +0000"
    return {"GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL, "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL, "GIT_COMMITTER_DATE": stamp}


def _target_listing(git: Git, repo: Path, ref: str) -> list[tuple[str, str, str]]:
    out = git("ls-tree", "-r", "-z", "--full-tree", ref, cwd=repo, what="reading the target")
    listing = []
    for record in filter(None, out.split("\0")):
        meta, path = record.split("\t", 1)
        mode, _kind, oid = meta.split()
        if path != SYNC_INFO_FILE:
            listing.append((mode, oid, path))
    return sorted(listing, key=lambda item: item[2])


def _fetch_target(git: Git, repo: Path, url: str, branch: str) -> str | None:
    """The target branch's head (fetched into the cache), or None when the target has no such branch yet."""
    what = f"reading the target {git.scrub(url)}"
    if not git("ls-remote", "--heads", "--", url, f"refs/heads/{branch}", cwd=repo, remote=Remote.TARGET, what=what):
        return None
    ref = f"refs/target/{branch}"
    git("fetch", "-q", "--no-tags", "--depth=1", "--", url, f"+refs/heads/{branch}:{ref}", cwd=repo,
        remote=Remote.TARGET, what=what)
    return git("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}", cwd=repo)


def _fetch_upstream(git: Git, repo: Path, config: DocSyncConfig, max_bytes: int) -> str:
    ref = f"refs/upstream/{config.branch}"
    what = f"fetching upstream {git.scrub(config.upstream_repo)} (branch {config.branch})"
    # Only the tip is mirrored, so a shallow fetch is enough (and keeps big upstreams cheap).
    git("fetch", "-q", "--depth=1", "--no-tags", "--", config.upstream_repo, f"+refs/heads/{config.branch}:{ref}",
        cwd=repo, remote=Remote.UPSTREAM, what=what, size_limit=(repo / "objects", max_bytes))
    return git("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}", cwd=repo)


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

    The config is checked again here (ConfigRefused) under this process's settings before any git command runs, and
    the upstream host is resolved and checked (ConfigRefused when it resolves inward).
    """
    config = check_doc_sync_config(config)
    try:
        pinned = pin_public_host(config.upstream_repo)
    except AddressRefused as exc:
        raise ConfigRefused(f"doc sync config refused: upstream_repo: {exc}") from None
    limits = settings.maintenance_settings()
    cache_root = work_dir / "doc_sync"
    with project_lock(cache_root, config.project), tempfile.TemporaryDirectory(prefix=".scratch-",
                                                                               dir=cache_root) as scratch_dir:
        scratch = Path(scratch_dir)
        git = Git(token, log, scratch,
                  upstream=RemoteAccess(urlsplit(config.upstream_repo).scheme.lower(), pinned),
                  target=RemoteAccess(urlsplit(target_url).scheme.lower()))
        repo = prepare_cache(cache_root / config.project, git, log)
        try:
            upstream_commit = _fetch_upstream(git, repo, config, limits.doc_sync_max_fetch_bytes)
        except GitCommandError:
            _remove(cache_root / config.project)  # whatever arrived is not kept (a partial or oversize pack)
            raise
        paths = tuple(config.docs_paths)
        kept, skipped = select_docs(list_entries(git, repo, upstream_commit, paths), limits.doc_sync_max_docs_bytes)
        for entry in skipped:
            log.warning(f"{config.project}: left out of the mirror: {entry}")
        target_head = _fetch_target(git, repo, target_url, config.target_branch)
        wanted = sorted(((e.mode, e.oid, e.path) for e in kept), key=lambda item: item[2])
        if target_head is not None and _target_listing(git, repo, target_head) == wanted:
            log.info(f"{config.project}: nothing changed since the last sync")
            return DocSyncResult(config.project, upstream_commit, target_head, False, len(kept), None, paths,
                                 tuple(skipped))
        info = sync_info(config, upstream_commit, now, git).encode()
        info_oid = git("hash-object", "-w", "--stdin", cwd=repo, stdin=info, what="writing the sync info")
        tree = write_tree(git, repo, [*kept, TreeEntry("100644", info_oid, len(info), SYNC_INFO_FILE)], scratch)
        message = f"Sync {config.project} docs from {git.scrub(config.upstream_repo)} @ {upstream_commit[:12]}"
        parents = ["-p", target_head] if target_head else []
        head = git("commit-tree", tree, *parents, "-m", message, cwd=repo, env=_identity(now), what="committing")
        push = f"pushing to the target {git.scrub(target_url)}"
        git("push", "-q", "--", target_url, f"{head}:refs/heads/{config.target_branch}", cwd=repo,
            remote=Remote.TARGET, what=push)
        # One snapshot per (UTC) day: a second sync on the same day moves that day's tag to the newer commit.
        tag = snapshot_tag(now)
        git("tag", "-f", "-a", tag, "-m", f"Snapshot of {config.project} docs {tag.removeprefix('snapshot-')}",
            head, cwd=repo, env=_identity(now), what="tagging")
        git("push", "-q", "-f", "--", target_url, f"refs/tags/{tag}", cwd=repo, remote=Remote.TARGET, what=push)
        log.info(f"{config.project}: pushed {head[:12]} ({len(kept)} files) and tag {tag}")
        return DocSyncResult(config.project, upstream_commit, head, True, len(kept), tag, paths, tuple(skipped))
