"""Every failing end-to-end test reports the tail of each of its processes' logs."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from ._support import ProcessGroup


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for group in _process_groups(item):
            report.sections.append(("process logs", group.diagnostics()))
    return report


def _process_groups(item: pytest.Item) -> list[ProcessGroup]:
    """The process groups of the fixtures this test uses (they expose ``processes``)."""
    groups: list[ProcessGroup] = []
    values: dict[str, Any] = getattr(item, "funcargs", {})
    for value in values.values():
        group = value if isinstance(value, ProcessGroup) else getattr(value, "processes", None)
        if isinstance(group, ProcessGroup) and all(group is not g for g in groups):
            groups.append(group)
    return groups
