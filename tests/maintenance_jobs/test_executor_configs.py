"""maintenance_jobs/executor_configs.py: the rules on the values a task's config hands to git and to the backup
executors: never an option, a branch git accepts, a path inside the repository, `owner/name`, and paths that resolve
under the deployment's roots (boundary rows: the root itself, a sibling that shares its prefix, a symlink out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maintenance_jobs.executor_configs import check_branch, check_docs_path, check_gitea_repo, check_under_roots

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("branch", ["main", "release/1.2", "feature-x", "a.b", "v1", "Xmas"])
def test_branch_names_git_accepts(branch: str) -> None:
    assert check_branch(branch) == branch


@pytest.mark.parametrize(
    ("branch", "message"),
    [
        ("-f", "'-f' must not start with '-' (git would read it as an option)"),
        ("--upload-pack=x", "'--upload-pack=x' must not start with '-' (git would read it as an option)"),
        ("", "'' is not a valid branch name"),
        ("a..b", "'a..b' is not a valid branch name"),
        ("a b", "'a b' is not a valid branch name"),
        *[(f"a{c}b", f"'a{c}b' is not a valid branch name") for c in "~^:?*["],
        ("a\\b", "'a\\\\b' is not a valid branch name"),
        ("ma\u200bin", "must not contain control, bidirectional formatting or invisible characters (found U+200B)"),
    ],
)
def test_branch_names_git_would_misread_are_refused(branch: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_branch(branch)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("raw", "path"),
    [("docs", "docs"), ("/docs/", "docs"), ("/XML/", "XML"), ("docs/api", "docs/api"), ("docs//api/", "docs/api"), ("a.b/c", "a.b/c"),
     ("docs/-x", "docs/-x")],
)
def test_docs_paths_are_cleaned(raw: str, path: str) -> None:
    assert check_docs_path(raw) == path


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "'' must be a path inside the repository"),
        ("/", "'/' must be a path inside the repository"),
        ("..", "'..' must be a path inside the repository"),
        ("docs/../..", "'docs/../..' must be a path inside the repository"),
        ("-x", "'-x' must not start with '-' (git would read it as an option)"),
        ("/-x", "'-x' must not start with '-' (git would read it as an option)"),  # as git sees it after cleaning
        (":(top)docs", "':(top)docs' must not start with ':' (git pathspec magic)"),
        ("/:/docs", "'/:/docs' must not start with ':' (git pathspec magic)"),
    ],
)
def test_docs_paths_outside_the_repository_or_read_as_options_are_refused(raw: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_docs_path(raw)
    assert str(refused.value) == message


@pytest.mark.parametrize(("value", "repo"), [("owner/name", "owner/name"), ("owner/name.git", "owner/name"),
                                             ("o-1/n_2.x", "o-1/n_2.x"), ("owner/name.GIT", "owner/name.GIT"),
                                             ("git/x.git", "git/x")])
def test_gitea_repositories_are_owner_slash_name(value: str, repo: str) -> None:
    assert check_gitea_repo(value) == repo


@pytest.mark.parametrize("value", ["name", "a/b/c", "/b", "a/", "-a/b", "a/.b", "a/b\n", "a b/c", ".git"])
def test_anything_else_is_refused_as_a_gitea_repository(value: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_gitea_repo(value)
    assert str(refused.value) == "must be 'owner/name'"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    allowed, other = tmp_path / "srv", tmp_path / "srv-other"
    (allowed / "app").mkdir(parents=True)
    (other / "secret").mkdir(parents=True)
    (allowed / "out").symlink_to(other / "secret")
    return allowed, other


def test_a_path_under_a_root_resolves(roots: tuple[Path, Path]) -> None:
    allowed, _ = roots
    assert check_under_roots(str(allowed / "app"), (allowed,), "ROOTS") == allowed / "app"
    assert check_under_roots(str(allowed), (allowed,), "ROOTS") == allowed  # the root itself
    assert check_under_roots(str(allowed / "app" / ".." / "new"), (allowed,), "ROOTS") == allowed / "new"
    assert check_under_roots(str(allowed / "app"), (Path("/nowhere"), allowed), "ROOTS") == allowed / "app"


@pytest.mark.parametrize("relative", ["../srv-other/secret", "out", "app/../../srv-other", ".."])
def test_a_path_that_resolves_outside_every_root_is_refused(roots: tuple[Path, Path], relative: str) -> None:
    allowed, _ = roots
    raw = f"{allowed}/{relative}"
    with pytest.raises(ValueError) as refused:
        check_under_roots(raw, (allowed, Path("/nowhere")), "ROOTS")
    assert str(refused.value) == f"{raw!r} must resolve under {allowed}, /nowhere (set by ROOTS)"


def test_a_relative_or_unresolvable_path_is_refused(roots: tuple[Path, Path]) -> None:
    allowed, _ = roots
    with pytest.raises(ValueError) as refused:
        check_under_roots("srv/app", (allowed,), "ROOTS")
    assert str(refused.value) == "'srv/app' must be an absolute path"
    nul = f"{allowed}/a\x00b"
    with pytest.raises(ValueError) as refused:
        check_under_roots(nul, (allowed,), "ROOTS")
    assert str(refused.value) == f"{nul!r} cannot be resolved"
