"""Doc sync's own `.git`-component check, called directly: the end-to-end test (test_doc_sync_hostile.py) cannot
reach it, because git's own fsck refuses those trees first. The check refuses `.git` in any case, the forms other file
systems read as `.git` (trailing dots and spaces, the 8.3 short name `git~1`), anywhere in the path; its neighbours
(`.github`, `git`, `.gitignore`, ...) are ordinary docs."""

from __future__ import annotations

import pytest

from maintenance_jobs.executors.doc_sync import GitCommandError, TreeEntry, _has_git_component, select_docs

pytestmark = pytest.mark.unit

REFUSED = [".git", ".GIT", ".Git", "git~1", "GIT~1", ".git.", ".git ", ".git. .", "git~1.", "a/.git/b",
           "a/b/.GIT", "docs/git~1/config", ".git/hooks/post-checkout", "docs/.git ./x.md"]
ALLOWED = [".github", "git", ".gitignore", ".gitattributes", ".gitmodules", "a/.github/workflows/ci.yml",
           "docs/git/index.md", "x.git", ".gitx", "git~2", "git~1x", "docs/.git-blame-ignore-revs", "a/b.git/c.md",
           "README.md"]


@pytest.mark.parametrize("path", REFUSED)
def test_a_git_component_is_found(path: str) -> None:
    assert _has_git_component(path) is True


@pytest.mark.parametrize("path", ALLOWED)
def test_a_neighbour_of_git_is_not(path: str) -> None:
    assert _has_git_component(path) is False


@pytest.mark.parametrize("path", REFUSED)
def test_the_sync_refuses_an_upstream_tree_with_a_git_component(path: str) -> None:
    entries = [TreeEntry("100644", "0" * 40, 10, "docs/index.md"), TreeEntry("100644", "1" * 40, 10, path)]
    with pytest.raises(GitCommandError, match="has a path with a .git component"):
        select_docs(entries, max_bytes=10_000)


def test_the_sync_keeps_the_neighbours_of_git() -> None:
    entries = [TreeEntry("100644", f"{i:040x}", 10, path) for i, path in enumerate(ALLOWED)]
    kept, skipped = select_docs(entries, max_bytes=10_000)
    assert [entry.path for entry in kept] == ALLOWED and skipped == []
