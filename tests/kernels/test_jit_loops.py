"""Loops built ahead of time (quantcore.kernels.jit.functions): the built module computes what numba's JIT
does, loads in a later process without numba, releases the GIL while it runs, refuses arguments of other
types than declared (a TypeError, not a crash), and where it cannot be built, the failure is said once,
recorded, and the JIT runs instead.

Each test builds into its own per-user cache ($XDG_CACHE_HOME): a C compiler is needed (numba.pycc links
with it), as on any machine where the loops are built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from quantcore.kernels import jit
from quantcore.kernels.jit import Array, Export, Loops

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(not jit.installed(), reason="numba is not installed"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build the loops with"),
]

TOY = Loops(
    "tests.kernels.toy_loops",
    (Export("scaled_sum", (Array("int16", 1), "float64", "int64", Array("float64", 1)), returns="float64"),),
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-user cache for this module's tests (the toy module is built once, about 4 s)."""
    return tmp_path_factory.mktemp("cache")


def _as_cache(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`folder` as the per-user cache, and no loops loaded in this process yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.setattr(jit, "_LOADED", {})
    return folder


@pytest.fixture
def cache(shared: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's per-user cache."""
    return _as_cache(shared, monkeypatch)


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A per-user cache of the test's own."""
    return _as_cache(tmp_path, monkeypatch)


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(-300, 300, 7, dtype=np.int16)
    return x, np.empty(x.size, np.float64)


def test_the_built_loop_computes_what_the_jit_does(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kernels import toy_loops

    built = jit.functions(TOY)
    folder = jit.built_folder(TOY)
    assert folder.is_relative_to(cache / "fixpoint" / "loops")
    files = [p.name for p in folder.iterdir()]
    assert len(files) == 1 and files[0].startswith("fixpoint_toy_loops.")
    assert capsys.readouterr().err == ""
    x, out = _inputs()
    total = built.scaled_sum(x, 0.37, 3, out)
    expected_out = np.empty_like(out)
    expected = toy_loops.scaled_sum(x, 0.37, 3, expected_out)
    assert total == expected  # the same float64 additions in the same order: the same bits
    assert np.array_equal(out, expected_out)
    assert jit.functions(TOY) is built  # loaded once per process


def test_a_later_process_loads_the_built_loop_without_numba(cache: Path) -> None:
    jit.functions(TOY)
    code = (
        "import json, sys\nimport numpy as np\nfrom quantcore.kernels import jit\n"
        "from tests.kernels.test_jit_loops import TOY, _inputs\n"
        "x, out = _inputs()\ntotal = jit.functions(TOY).scaled_sum(x, 0.5, 1, out)\n"
        "print(json.dumps([total, 'numba' in sys.modules, 'llvmlite' in sys.modules]))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    x, _ = _inputs()
    assert json.loads(run.stdout) == [float(np.sum(x * 0.5)), False, False]


def test_the_built_loop_releases_the_gil(cache: Path) -> None:
    """While the loop runs in another thread, this one keeps running Python: it counts."""
    scaled_sum = jit.functions(TOY).scaled_sum
    x, out = np.ones(100_000, np.int16), np.empty(100_000, np.float64)
    scaled_sum(x, 1.0, 1, out)
    worker = threading.Thread(target=scaled_sum, args=(x, 1.0, 20_000, out))  # about a second
    counted = 0
    worker.start()
    while worker.is_alive():
        counted += 1
    worker.join()
    # holding the GIL, the loop would let this thread run only around its call: a handful of counts
    assert counted > 10_000


def test_arguments_of_other_types_are_refused(cache: Path) -> None:
    scaled_sum = jit.functions(TOY).scaled_sum
    x, out = _inputs()
    declared = r"argument 0 is \(dtype\('int32'\), \(86,\)\), declared int16\[::1\]"
    with pytest.raises(TypeError, match=declared):
        scaled_sum(x.astype(np.int32), 1.0, 1, out)
    with pytest.raises(TypeError, match=r"argument 3 .* declared float64"):
        scaled_sum(x, 1.0, 1, np.empty((2, x.size)))
    with pytest.raises(TypeError, match="argument 0"):
        scaled_sum(np.repeat(x, 2)[::2], 1.0, 1, out)  # strided where C order is declared
    with pytest.raises(TypeError, match="3 arguments, declared 4"):
        scaled_sum(x, 1.0, 1)
    assert scaled_sum(x, 2, np.int64(1), out) == float(np.sum(x * 2.0))  # scalars converted


def test_a_module_that_cannot_be_built_falls_back_to_the_jit_once_said(
    fresh: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Loops(TOY.module, (Export("scaled_sum", TOY.exports[0].args, returns="no_such_type"),))
    functions = jit.functions(broken)
    err = capsys.readouterr().err
    assert err.startswith("fixpoint: the compiled loops could not be built for this machine (")
    assert "numba compiles them in each process instead" in err
    folder = jit.built_folder(broken)
    assert (folder / jit.FAILED).read_text().strip() in err
    assert [p.name for p in folder.iterdir()] == [jit.FAILED]  # no scratch folder left behind
    x, out = _inputs()
    assert functions.scaled_sum(x, 0.5, 1, out) == float(np.sum(x * 0.5))  # numba's JIT
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(jit, "_build", lambda *args: pytest.fail("built again"))
    jit.functions(broken)  # a later process: the recorded failure, no second try and nothing said
    assert capsys.readouterr().err == ""


def test_a_cache_that_cannot_be_written_falls_back_to_the_jit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """$XDG_CACHE_HOME is a file: no folder can be made under it, so nothing is built or recorded; the
    loops run on numba's JIT, and the reason is said."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(jit, "_LOADED", {})
    x, out = _inputs()
    assert jit.functions(TOY).scaled_sum(x, 0.5, 1, out) == float(np.sum(x * 0.5))
    err = capsys.readouterr().err
    assert err.startswith("fixpoint: the compiled loops could not be built for this machine (")
    assert "Not a directory" in err
    assert blocker.read_text() == ""
