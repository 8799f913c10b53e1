"""Fixtures shared by the server's hostile-tree tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = tmp_path / "fw"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return root.resolve()
