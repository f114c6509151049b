"""Metric names referenced by a PromQL expression (Grafana targets and alert rules), without a PromQL parser.

Strings, label matchers, ranges, grouping clauses and Grafana variables are removed first; what is left that looks
like an identifier and is neither a function call nor a keyword is a metric name.
"""

from __future__ import annotations

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf",
     "nan", "atan2", "e"}
)


def metric_names(expr: str) -> set[str]:
    """Names of the metrics `expr` selects, e.g. {"orchestration_runs"} for `sum by (job) (orchestration_runs{…})`."""
    text = _STRING.sub(" ", expr)
    text = _GRAFANA_VARIABLE.sub(" ", text)
    # Label values are gone, so matcher braces no longer nest; Grafana's `${…}` braces went with the variables.
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
            continue
        names.add(name)
    return names


def unknown_metrics(expr: str, known: frozenset[str]) -> set[str]:
    return metric_names(expr) - known
