"""Safe regeneration: every generated file carries its own content hash; a hand edit stops the whole
regeneration (nothing written) unless forced, forcing keeps a .bak, and unchanged inputs touch nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore.codegen import HandEditedError
from quantcore.codegen.files import PLACEHOLDER, Outcome, is_intact, recorded_hash, stamp, write_generated
from quantcore.codegen.generate import Sources, generate
from quantcore.ir import Graph
from quantcore.quantize.document import CMSIS_NN_API
from tests.onnx_models import small_cnn

NAMES = ("model.h", "model.c", "model_data.c")


def test_stamp_fills_in_the_hash_of_the_text_with_the_placeholder() -> None:
    text = f"/* content-sha256: {PLACEHOLDER} */\nint x;\n"
    stamped = stamp(text)
    assert recorded_hash(stamped) == hashlib.sha256(text.encode()).hexdigest()
    assert is_intact(stamped)
    assert not is_intact(stamped.replace("int x;", "int x = 1;"))
    assert not is_intact("int x;\n")  # no stamp: not a file Fixpoint wrote
    with pytest.raises(ValueError, match="exactly one content-sha256 placeholder"):
        stamp("int x;\n")


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, Sources]:
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.quantize import params_json
    from quantcore.quantize.document import from_document

    folder = tmp_path_factory.mktemp("small")
    onnx.save(small_cnn(batch=1), folder / "small.onnx")
    loaded = pipeline.load_model(folder / "small.onnx")
    x = np.random.default_rng(0).normal(size=(8, 1, 16, 16)).astype(np.float32)
    document = pipeline.quantize(loaded, DataSet(x)).document
    params_json.write(folder / "small.params.json", document)
    return from_document(loaded.graph, document), Sources(folder / "small.params.json", folder / "small.onnx")


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_every_file_names_its_sources_their_hashes_and_is_intact(
    model_files: tuple[Graph, Sources], tmp_path: Path
) -> None:
    graph, sources = model_files
    result = generate(graph, tmp_path, sources=sources)
    assert [(f.path.name, f.outcome) for f in result.files] == [(n, Outcome.CREATED) for n in NAMES]
    assert sources.params is not None and sources.model is not None
    params_sha = hashlib.sha256(sources.params.read_bytes()).hexdigest()
    model_sha = hashlib.sha256(sources.model.read_bytes()).hexdigest()
    for name in NAMES:
        text = (tmp_path / name).read_text()
        head = text[: text.index("*/")]
        assert is_intact(text), name
        assert (
            f"small.params.json (sha256 {params_sha})" in head and f"small.onnx (sha256 {model_sha})" in head
        )
        assert f"CMSIS-NN: API {CMSIS_NN_API}, core cortex-m4, double rounding" in head


def test_regenerating_unchanged_inputs_rewrites_nothing(
    model_files: tuple[Graph, Sources], tmp_path: Path
) -> None:
    graph, sources = model_files
    generate(graph, tmp_path, sources=sources)
    before = _snapshot(tmp_path)
    result = generate(graph, tmp_path, sources=sources)
    assert result.changed == () and [f.outcome for f in result.files] == [Outcome.UNCHANGED] * 3
    assert _snapshot(tmp_path) == before


def test_a_changed_setting_updates_only_the_files_it_changes(
    model_files: tuple[Graph, Sources], tmp_path: Path
) -> None:
    graph, sources = model_files
    generate(graph, tmp_path, sources=sources, alignment=16)
    data_before = (tmp_path / "model_data.c").read_text()
    result = generate(graph, tmp_path, sources=sources, alignment=32)
    assert {f.path.name for f in result.changed} == set(NAMES)  # the alignment is in every file
    assert "aligned(32)" in (tmp_path / "model_data.c").read_text() and "aligned(32)" not in data_before
    assert not list(tmp_path.glob("*.bak")) and not list(tmp_path.glob(".*tmp*"))


def test_a_hand_edited_file_stops_the_regeneration_and_nothing_is_written(
    model_files: tuple[Graph, Sources], tmp_path: Path
) -> None:
    graph, sources = model_files
    generate(graph, tmp_path, sources=sources)
    edited = (
        (tmp_path / "model.c")
        .read_text()
        .replace("int model_invoke(void)", "int model_invoke(void) /* mine */")
    )
    (tmp_path / "model.c").write_text(edited)
    before = _snapshot(tmp_path)
    with pytest.raises(HandEditedError) as info:
        generate(graph, tmp_path, sources=sources, alignment=32)  # would change all three files
    assert info.value.paths == [str(tmp_path / "model.c")]
    assert "model.c" in str(info.value) and "--force" in str(info.value)
    assert _snapshot(tmp_path) == before


def test_forcing_replaces_the_edited_file_and_keeps_it_as_a_backup(
    model_files: tuple[Graph, Sources], tmp_path: Path
) -> None:
    graph, sources = model_files
    generate(graph, tmp_path, sources=sources)
    pristine = (tmp_path / "model_data.c").read_text()
    (tmp_path / "model_data.c").write_text(pristine + "/* tuned by hand */\n")
    result = generate(graph, tmp_path, sources=sources, force=True)
    outcomes = {f.path.name: (f.outcome, f.backup) for f in result.files}
    assert outcomes == {
        "model.h": (Outcome.UNCHANGED, None),
        "model.c": (Outcome.UNCHANGED, None),
        "model_data.c": (Outcome.REPLACED, tmp_path / "model_data.c.bak"),
    }
    assert (tmp_path / "model_data.c").read_text() == pristine
    assert (tmp_path / "model_data.c.bak").read_text() == pristine + "/* tuned by hand */\n"


def test_a_file_fixpoint_did_not_write_is_never_overwritten_silently(tmp_path: Path) -> None:
    (tmp_path / "model.h").write_text("/* the team's own header */\n")
    files = {"model.h": stamp(f"/* content-sha256: {PLACEHOLDER} */\n")}
    with pytest.raises(HandEditedError, match="not generated by Fixpoint"):
        write_generated(tmp_path, files)
    (tmp_path / "sub.c").mkdir()
    with pytest.raises(HandEditedError, match="is not a file"):
        write_generated(tmp_path, {"sub.c": files["model.h"]})
    assert (tmp_path / "model.h").read_text() == "/* the team's own header */\n"


def test_new_files_get_the_umask_mode_and_updates_keep_the_old_mode(tmp_path: Path) -> None:
    first = {"a.c": stamp(f"/* content-sha256: {PLACEHOLDER} */\nint a;\n")}
    umask = os.umask(0o022)
    try:
        write_generated(tmp_path, first)
    finally:
        os.umask(umask)
    assert (tmp_path / "a.c").stat().st_mode & 0o777 == 0o644
    (tmp_path / "a.c").chmod(0o600)
    write_generated(tmp_path, {"a.c": stamp(f"/* content-sha256: {PLACEHOLDER} */\nint b;\n")})
    assert (tmp_path / "a.c").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "a.c").read_text().endswith("int b;\n")
