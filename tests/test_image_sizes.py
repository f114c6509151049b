"""bench/image_sizes.py's arithmetic and parsing: each image's figure against its base and budget, and the breakdowns
of what an image holds, must be right before an image is judged by them."""

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("image_sizes", REPO_ROOT / "bench" / "image_sizes.py")
image_sizes = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = image_sizes
spec.loader.exec_module(image_sizes)

BASE = 190_846_078  # the stand-in python:3.11-slim-bookworm's Size


def test_the_budgets_are_the_issues() -> None:
    assert image_sizes.BUDGET_MB == {"user-code": 450, "dagster": 220}


def test_a_report_row_per_image_with_its_base_and_what_it_adds() -> None:
    rows = image_sizes.image_budget_report({"user-code": 1_059_684_036, "dagster": 397_196_249}, BASE)
    assert [(r.image, r.size_mb, r.base_mb, r.above_base_mb, r.budget_mb, r.within_budget) for r in rows] == [
        ("user-code", 1059.7, 190.8, 868.8, 450, False),
        ("dagster", 397.2, 190.8, 206.4, 220, True),
    ]


@pytest.mark.parametrize(("above_base", "within"), [
    (450_000_000, True),   # exactly the budget
    (450_000_001, False),  # one byte over: still 450.0 MB rounded, judged on bytes
    (0, True),
])
def test_the_budget_boundary_is_judged_on_bytes(above_base: int, within: bool) -> None:
    (row,) = image_sizes.image_budget_report({"user-code": BASE + above_base}, BASE)
    assert row.within_budget is within


def test_bases_per_image_and_an_image_without_budget() -> None:
    rows = image_sizes.image_budget_report({"dagster": 300_000_000, "front": 294_000_000},
                                           {"dagster": 100_000_000, "front": 94_000_000})
    assert [(r.above_base_mb, r.within_budget) for r in rows] == [(200.0, True), (200.0, None)]


def test_an_image_smaller_than_its_base_is_refused() -> None:
    with pytest.raises(ValueError, match="dagster: .* smaller than its base"):
        image_sizes.image_budget_report({"dagster": BASE - 1}, BASE)


def test_the_rendered_report_says_over_within_and_no_budget() -> None:
    text = image_sizes.render_report(image_sizes.image_budget_report(
        {"user-code": BASE + 451_000_000, "dagster": BASE + 10_000_000, "front": BASE}, BASE))
    lines = text.splitlines()
    assert lines[1].split() == ["user-code", "641.8", "190.8", "451.0", "450", "OVER"]
    assert lines[2].split() == ["dagster", "200.8", "190.8", "10.0", "220", "within"]
    assert lines[3].split() == ["front", "190.8", "190.8", "0.0", "-", "no", "budget"]


@pytest.mark.parametrize(("dockerfile", "base"), [
    ("FROM python:3.11-slim-bookworm AS wheel\nRUN x\nFROM debian:12 AS other\nFROM python:3.11-slim-bookworm\n",
     "python:3.11-slim-bookworm"),
    ("# syntax=docker/dockerfile:1\nFROM --platform=linux/amd64 python:3.12-slim AS final\n", "python:3.12-slim"),
])
def test_the_base_is_the_final_stages(dockerfile: str, base: str) -> None:
    assert image_sizes.final_base(dockerfile) == base


def test_the_projects_dockerfiles_are_built_on_the_slim_python() -> None:
    for dockerfile, _ in image_sizes.IMAGES.values():
        assert image_sizes.final_base((REPO_ROOT / dockerfile).read_text()) == "python:3.11-slim-bookworm"


@pytest.mark.parametrize(("entry", "package"), [
    ("numpy", "numpy"), ("numpy.libs", "numpy"), ("numpy-2.4.6.dist-info", "numpy"),
    ("psycopg2_binary-2.9.10.dist-info", "psycopg2_binary"), ("psycopg2_binary.libs", "psycopg2_binary"),
    ("typing_extensions.py", "typing_extensions"), ("dagster-1.13.27.dist-info", "dagster"),
    ("dagster_webserver", "dagster_webserver"), ("google", "google"),
])
def test_site_packages_entries_count_with_their_package(entry: str, package: str) -> None:
    assert image_sizes.package_of(entry) == package


def test_the_package_breakdown_adds_libs_and_metadata_largest_first() -> None:
    du = ("45000\t/usr/local/lib/python3.11/dist-packages/numpy\n"
          "28000\t/usr/local/lib/python3.11/dist-packages/numpy.libs\n"
          "100\t/usr/local/lib/python3.11/dist-packages/numpy-2.4.6.dist-info\n"
          "170000\t/usr/local/lib/python3.11/dist-packages/pyarrow\n"
          "20\t/usr/local/lib/python3.11/dist-packages/six.py\n\n")
    assert image_sizes.package_breakdown(du, top=2) == [("pyarrow", 174.1), ("numpy", 74.9)]


@pytest.mark.parametrize(("text", "size"), [("0B", 0), ("512B", 512), ("8.87kB", 8870), ("91.3MB", 91_300_000),
                                            ("1.06GB", 1_060_000_000)])
def test_docker_sizes(text: str, size: int) -> None:
    assert image_sizes.docker_size_bytes(text) == size


def test_a_size_docker_does_not_print_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Docker size"):
        image_sizes.docker_size_bytes("91.3MiB")


def test_large_layers_keep_a_megabyte_and_more_with_the_command() -> None:
    history = ("0B\t/bin/sh -c #(nop)  CMD [\"dagster\"]\n"
               "8.87kB\t|1 KUBERNETES=0 /bin/sh -c useradd --system dagster\n"
               "320MB\t|1 KUBERNETES=0 /bin/sh -c case \"$KUBERNETES\" in 0|1) ;; esac && pip install\n"
               "1.11MB\t/bin/sh -c #(nop) COPY dir:5728 in /opt/postgres-client\n"
               "1MB\t/bin/sh -c apt-get clean\n"
               "191MB\t\n")
    assert image_sizes.large_layers(history) == [
        ("320MB", 'case "$KUBERNETES" in 0|1) ;; esac && pip install'),
        ("1.11MB", "COPY dir:5728 in /opt/postgres-client"),
        ("1MB", "apt-get clean"),
        ("191MB", "(base image)"),
    ]
