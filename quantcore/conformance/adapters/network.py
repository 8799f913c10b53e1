"""Adapter for whole-network cases (any case whose defines name layers), run layer by layer."""

from __future__ import annotations

from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network import is_network, load_network
from quantcore.conformance.registry import Outcome, fallback, outcome
from quantcore.kernels.requantize import Rounding


@fallback(is_network)
def network(case: VectorCase, rounding: Rounding) -> Outcome:
    net = load_network(case)
    x = case.raw_array(f"{case.name}_input").reshape(1, *net.input_shape)
    return outcome(net.run(x, rounding)[-1], case.raw_array(f"{case.name}_output_ref"))
