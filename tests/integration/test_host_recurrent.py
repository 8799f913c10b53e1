"""The LSTM and SVDF references against CMSIS-NN compiled for the host, call by call, for both roundings.

Seeded random calls (tests/kernels/recurrent_calls.py forces the saturation and rounding edges) go to the
reference and to bench/cmsisnn_recurrent_runner.c, built against the host libcmsis-nn.a with the same
rounding; outputs and the state buffers the kernel leaves must be identical. Needs a CMSIS-NN checkout,
found the way the product finds one; skipped with the locator's message when there is none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore.conformance.adapters.recurrent import case_lstm_params
from quantcore.conformance.cases import VectorCase
from quantcore.errors import CmsisNnNotFound, KernelArgumentError
from quantcore.kernels.lstm import LstmResult, lstm_unidirectional_s8, lstm_unidirectional_s16
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import svdf_s8, svdf_state_s16_s8
from quantcore.targets import cmsis_nn
from quantcore.verify.host_cmsis_nn import HostRunError
from quantcore.verify.host_recurrent import build_recurrent_runner, run_lstm, run_svdf, serialise_lstm
from tests import needs
from tests.conftest import vectors_dir
from tests.kernels.recurrent_calls import lstm_call, svdf_calls

pytestmark = pytest.mark.cmsis_nn

CALLS = 24
"""Random calls per configuration: each is one runner process (a few ms)."""


@pytest.fixture(scope="module")
def checkout() -> cmsis_nn.CmsisNn:
    try:
        return cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))


@pytest.fixture(scope="module", params=list(Rounding), ids=lambda r: r.value)
def built(request: pytest.FixtureRequest, checkout: cmsis_nn.CmsisNn) -> tuple[Path, Rounding]:
    rounding: Rounding = request.param
    return build_recurrent_runner(checkout, rounding), rounding


def _differences(ours: Any, theirs: Any, what: str) -> list[str]:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return [f"{what}: {ours.dtype}{ours.shape} vs C {theirs.dtype}{theirs.shape}"]
    differ = np.flatnonzero(ours.ravel() != theirs.ravel())
    if differ.size == 0:
        return []
    i = int(differ[0])
    return [f"{what}: {differ.size} values differ, first at {i}: {ours.ravel()[i]} vs C {theirs.ravel()[i]}"]


def _lstm_differences(ours: LstmResult, theirs: LstmResult) -> list[str]:
    found = _differences(ours.output, theirs.output, "output")
    found += _differences(ours.cell_state, theirs.cell_state, "cell_state")
    if ours.hidden_state is not None or theirs.hidden_state is not None:
        found += _differences(ours.hidden_state, theirs.hidden_state, "hidden_state")
    return found


@pytest.mark.parametrize("s16", [False, True], ids=["s8", "s16"])
@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_lstm_matches_compiled_cmsis_nn(
    built: tuple[Path, Rounding], s16: bool, time_major: bool, stateful: bool
) -> None:
    runner, rounding = built
    reference = lstm_unidirectional_s16 if s16 else lstm_unidirectional_s8
    failures = []
    for seed in range(CALLS):
        call = lstm_call(np.random.default_rng([21, seed]), s16, time_major, stateful)
        hidden, cell = call.hidden_state, call.cell_state
        ours = reference(call.x, call.params, hidden_state=hidden, cell_state=cell, rounding=rounding)
        theirs, _ = run_lstm(runner, call.x, call.params, hidden_state=hidden, cell_state=cell)
        failures += [f"seed {seed}: {d}" for d in _lstm_differences(ours, theirs)]
    assert failures == []


def test_a_hidden_state_without_a_cell_state_is_refused_as_the_reference_refuses_it() -> None:
    call = lstm_call(np.random.default_rng(21), s16=False, time_major=True, stateful=True)
    with pytest.raises(KernelArgumentError) as reference:
        lstm_unidirectional_s8(call.x, call.params, hidden_state=call.hidden_state)
    with pytest.raises(HostRunError) as runner:
        serialise_lstm(call.x, call.params, call.hidden_state, None)
    problem = "must be given with a hidden_state (the C reads it as the starting cell)"
    assert str(reference.value) == f"arm_lstm_unidirectional_s8: argument 'cell_state' {problem}"
    assert str(runner.value) == f"cell_state {problem}"


@pytest.mark.parametrize("s16_state", [False, True], ids=["svdf_s8", "svdf_state_s16_s8"])
def test_svdf_matches_compiled_cmsis_nn(built: tuple[Path, Rounding], s16_state: bool) -> None:
    runner, rounding = built
    reference = svdf_state_s16_s8 if s16_state else svdf_s8
    failures = []
    for seed in range(2 * CALLS):
        c = svdf_calls(np.random.default_rng([2121, seed]), s16_state)
        state, outputs = c.state, []
        for x in c.inputs:
            out, state = reference(
                x, state, c.weights_feature, c.weights_time, c.bias, c.params, rounding=rounding
            )
            outputs.append(out)
        theirs, _ = run_svdf(runner, c.inputs, c.state, c.weights_feature, c.weights_time, c.bias, c.params)
        found = _differences(np.stack(outputs), theirs.outputs, "outputs")
        found += _differences(state, theirs.state, "state")
        failures += [f"seed {seed}: {d}" for d in found]
    assert failures == []


def test_runner_reproduces_a_vector_case(built: tuple[Path, Rounding]) -> None:
    # Anchors the harness to CMSIS-NN's own expected bytes, independently of the reference: the stateful
    # batch-major multi-batch vector, wired as its unit test wires it.
    runner, rounding = built
    root = vectors_dir()
    path = root / "arm_lstm_unidirectional_s8" / "lstm_stateful_batch_major_multibatch.json" if root else None
    if path is None or not path.is_file():
        needs.absent("the CMSIS-NN vector folder is not available")
    if rounding is not Rounding.DOUBLE:
        pytest.skip("the vectors' expected bytes are the default (double) rounding's")
    case = VectorCase.load(path)
    params = case_lstm_params(case, time_major=False, s16=False)
    x = case.raw_array(f"{case.name}_input_tensor").reshape(2, 2, 6)
    hidden = np.full((2, 7), case.define("OUTPUT_ZERO_POINT"), dtype=np.int8)
    theirs, _ = run_lstm(runner, x, params, hidden_state=hidden, cell_state=np.zeros((2, 7), np.int16))
    assert theirs.output.tobytes() == case.raw_array(f"{case.name}_output").tobytes()
