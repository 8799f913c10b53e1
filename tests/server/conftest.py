"""Fixtures shared by the server's hostile-tree tests: a small firmware folder, and 1,500 nested folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = tmp_path / "fw"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return root.resolve()


def nest(folder: Path, depth: int) -> list[Path]:
    """`folder`/d/d/... `depth` levels, made one level at a time (os.makedirs recurses once a level)."""
    levels = [folder]
    folder.mkdir()
    for _ in range(depth):
        levels.append(levels[-1] / "d")
        levels[-1].mkdir()
    return levels


def unnest(levels: list[Path]) -> None:
    """Remove what nest made, deepest first: shutil.rmtree (and so pytest's cleanup of old temporary
    folders) recurses once a level and fails on 1,500 of them."""
    for level in reversed(levels):
        for entry in level.iterdir():
            if not entry.is_dir():
                entry.unlink()
        level.rmdir()


@pytest.fixture
def deep(small: Path) -> Iterator[list[Path]]:
    levels = nest(small / "deep", 1500)
    yield levels
    unnest(levels)
