"""The reference executor against compiled CMSIS-NN on the host, layer by layer, for both roundings.

Needs a CMSIS-NN checkout, found the way the product finds one (FIXPOINT_CMSIS_NN, then the cache);
skipped with the locator's message when there is none. Builds are cached per commit and rounding.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network import Network, load_network
from quantcore.errors import CmsisNnNotFound
from quantcore.kernels.requantize import Rounding
from quantcore.targets import cmsis_nn
from quantcore.verify.host_cmsis_nn import build_runner, run_network
from tests import needs

pytestmark = pytest.mark.cmsis_nn

REPO = Path(__file__).resolve().parents[2]
VECTORS = Path(os.environ.get("FIXPOINT_VECTORS") or REPO.parent / "shared" / "cmsisnn-vectors")
DS_CNN_S = VECTORS / "arm_ds_cnn_s_s8" / "ds_cnn_s.json"


@pytest.fixture(scope="module")
def checkout() -> cmsis_nn.CmsisNn:
    try:
        return cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))


@pytest.fixture(scope="module")
def case() -> VectorCase:
    if not DS_CNN_S.is_file():
        needs.absent(f"{DS_CNN_S} not found; set FIXPOINT_VECTORS to the CMSIS-NN vector directory")
    return VectorCase.load(DS_CNN_S)


@pytest.fixture(scope="module")
def net(case: VectorCase) -> Network:
    return load_network(case)


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
def test_every_layer_matches_compiled_cmsis_nn(
    checkout: cmsis_nn.CmsisNn, net: Network, rounding: Rounding
) -> None:
    runner = build_runner(checkout, rounding)
    x = np.random.default_rng(20240601).integers(-128, 128, (64, *net.input_shape), dtype=np.int8)
    reference = net.run(x, rounding)
    host = run_network(runner, net, x, all_layers=True)
    assert len(host.outputs) == len(reference) == len(net.layers)
    for layer, ours, theirs in zip(net.layers, reference, host.outputs, strict=True):
        assert ours.dtype == theirs.dtype == np.int8, layer.name
        assert ours.shape == theirs.shape, layer.name
        differ = np.flatnonzero(ours.ravel() != theirs.ravel())
        assert differ.size == 0, (
            f"{layer.name} ({rounding.value}): {differ.size} values differ, first {differ[0]}"
        )


def test_runner_reproduces_the_vector_output(
    checkout: cmsis_nn.CmsisNn, case: VectorCase, net: Network
) -> None:
    # Anchors the harness itself to CMSIS-NN's own expected output (TFLite's, i.e. default rounding),
    # independently of the reference executor.
    runner = build_runner(checkout, Rounding.DOUBLE)
    x = case.raw_array(f"{case.name}_input").reshape(1, *net.input_shape)
    host = run_network(runner, net, x)
    assert host.outputs[-1].tobytes() == case.raw_array(f"{case.name}_output_ref").tobytes()


def test_single_rounding_build_differs_from_default(
    checkout: cmsis_nn.CmsisNn, case: VectorCase, net: Network
) -> None:
    # The define must reach the library: on the vector's input the two builds give different bytes.
    x = case.raw_array(f"{case.name}_input").reshape(1, *net.input_shape)
    double = run_network(build_runner(checkout, Rounding.DOUBLE), net, x).outputs[-1]
    single = run_network(build_runner(checkout, Rounding.SINGLE), net, x).outputs[-1]
    assert double.tobytes() != single.tobytes()
