"""Automatic mixed precision: which tensors to carry at int16, within a Flash/RAM budget.

An int16 layer alone gains almost nothing: its input comes from an int8 tensor (converted, with the int8
rounding already in it) and its output is converted back to int8 for the next layer, rounded on the int8
grid again. What int16 removes is the int8 rounding of a *tensor*, and only when every layer touching it
runs at int16 - its producer and all its readers (through reshape/transpose/pad, which pass int16 on). So
the picker's moves are tensors: a move makes the tensor's producer and readers int16 layers, and is
possible only when CMSIS-NN has s16 kernels for all of them (the graph output needs only its producer).

The moves are tried in the order of the sensitivity analysis (the producer whose lone quantization costs
the most output SQNR first), greedily: each is quantized, measured on the selection samples with the
bit-exact reference (int8 and int16 kernels as the firmware runs them) and costed from the generated
program's plan (constants for Flash, arena + scratch for RAM, on the target core); a move is kept when it
fits the budget and raises the output SQNR by at least MIN_GAIN_DB.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quantcore.display import one_line, quoted, shorten
from quantcore.errors import QuantcoreError
from quantcore.ir import Graph, Op
from quantcore.quantize.precision import INT16_OUTPUT_MARGIN, S16_CAPABLE

MIN_GAIN_DB = 0.1
"""Smaller gains are within what the choice of selection samples moves."""
MAX_TRIALS = 12
"""Moves tried at most (each costs a quantization and a reference run over the selection samples)."""
_PASSES_INT16 = (Op.RESHAPE, Op.TRANSPOSE, Op.PAD)
REASON_CHARS = 512
"""The schema's bound on transforms.int16_output.reason."""
_NAME = 120
"""Characters of a name quoted in a reason: two fit in REASON_CHARS."""


@dataclass(frozen=True)
class Budget:
    flash: int | None = None
    """Bytes of constants (weights, biases, multipliers) the model may take; None: no limit."""
    ram: int | None = None
    """Bytes of arena + scratch; None: no limit."""

    def problem(self, flash: int, ram: int) -> str | None:
        if self.flash is not None and flash > self.flash:
            return f"flash {flash} B > budget {self.flash} B"
        if self.ram is not None and ram > self.ram:
            return f"ram {ram} B > budget {self.ram} B"
        return None


@dataclass(frozen=True)
class Memory:
    flash: int
    ram: int


@dataclass(frozen=True)
class Move:
    tensor: str
    layers: frozenset[str]


@dataclass
class Choice:
    layers: frozenset[str]
    sqnr_int8: float
    sqnr: float
    memory_int8: Memory
    memory: Memory
    qgraph: Graph
    trials: list[dict[str, Any]] = field(default_factory=list)


def moves(graph: Graph, ranking: list[str]) -> list[Move]:
    """The tensors that can be carried at int16, in the order of their producers in `ranking` (the most
    sensitive layer first); the float graph's layer names."""
    readers: dict[str, list[str]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node.name)
    order = {name: i for i, name in enumerate(ranking)}
    result = []
    for node in sorted(graph.nodes, key=lambda n: order.get(n.name, len(order))):
        if node.name not in order or node.op not in S16_CAPABLE:
            continue
        layers = {node.name}
        frontier = list(readers.get(node.outputs[0], []))
        possible = True
        while frontier and possible:
            reader = graph.node(frontier.pop())
            if reader.op in _PASSES_INT16:
                frontier += readers.get(reader.outputs[0], [])
            elif reader.op in S16_CAPABLE:
                layers.add(reader.name)
            else:
                possible = False
        if possible:
            result.append(Move(node.outputs[0], frozenset(layers)))
    return result


def output_move(graph: Graph) -> Move | str:
    """The move that carries the graph's outputs at int16: their producers alone (through the reshape,
    transpose or pad in between, which pass int16 on), since nothing reads an output but the application.
    A string says why there is none: a producer without an s16 kernel (a softmax), or an output that is a
    graph input passed through."""
    producer = {out: node for node in graph.nodes for out in node.outputs}
    layers = set()
    for name in graph.outputs:
        node = producer.get(name)
        while node is not None and node.op in _PASSES_INT16:
            node = producer.get(node.inputs[0])
        if node is None:
            return f"output {quoted(name, _NAME)} is a graph input passed through: no layer produces it"
        if node.op not in S16_CAPABLE:
            return (
                f"layer {quoted(node.name, _NAME)} ({node.op.json_name}) producing {quoted(name, _NAME)}"
                " has no CMSIS-NN s16 kernel"
            )
        layers.add(node.name)
    return Move(", ".join(graph.outputs), frozenset(layers))


def choose(
    candidates: list[Move],
    build: Callable[[frozenset[str]], Graph],
    score: Callable[[Graph], float],
    memory: Callable[[Graph], Memory],
    budget: Budget,
    min_gain: float = MIN_GAIN_DB,
) -> Choice:
    """Greedy over `candidates` (see the module docstring). `build` quantizes with the given int16
    layers; `score` is the output SQNR on the selection samples; `memory` the generated program's; a
    move is kept when it gains `min_gain` dB (-inf: whatever it gains, a move the user asked for)."""
    base = build(frozenset())
    base_sqnr, base_memory = score(base), memory(base)
    best = Choice(frozenset(), base_sqnr, base_sqnr, base_memory, base_memory, base)
    for move in candidates[:MAX_TRIALS]:
        layers = best.layers | move.layers
        if layers == best.layers:
            continue  # an earlier move already made these layers int16
        trial: dict[str, Any] = {"tensor": move.tensor, "layers": sorted(move.layers)}
        try:
            qgraph = build(layers)
            cost = memory(qgraph)
        except QuantcoreError as err:  # a placement the kernels or the code generator refuse
            best.trials.append({**trial, "kept": False, "reason": str(err)})
            continue
        trial.update(flash=cost.flash, ram=cost.ram)
        over = budget.problem(cost.flash, cost.ram)
        if over is not None:
            best.trials.append({**trial, "kept": False, "reason": over})
            continue
        sqnr = score(qgraph)
        trial["output_sqnr_db"] = round(sqnr, 3)
        if sqnr < best.sqnr + min_gain:
            best.trials.append({**trial, "kept": False, "reason": f"gain {sqnr - best.sqnr:+.2f} dB"})
            continue
        best.trials.append({**trial, "kept": True})
        best = Choice(layers, best.sqnr_int8, sqnr, best.memory_int8, cost, qgraph, best.trials)
    return best


def entry(choice: Choice, budget: Budget) -> dict[str, Any]:
    """The quant-params JSON's "mixed_precision" record of an automatic choice."""
    return {
        "mode": "auto",
        "budget": {"flash": budget.flash, "ram": budget.ram},
        "layers": sorted(choice.layers),
        "output_sqnr_db": {"int8": round(choice.sqnr_int8, 3), "mixed": round(choice.sqnr, 3)},
        "memory": {
            "int8": {"flash": choice.memory_int8.flash, "ram": choice.memory_int8.ram},
            "mixed": {"flash": choice.memory.flash, "ram": choice.memory.ram},
        },
        "trials": choice.trials,
    }


def output_entry(choice: Choice) -> dict[str, Any]:
    """The figures of transforms.int16_output: the output SQNR and memory without and with the int16
    output, its range margin, and why it was not kept (over budget, too small a gain, refused)."""
    trial = choice.trials[0] if choice.trials else {}
    result: dict[str, Any] = {"applied": bool(choice.layers), "margin": INT16_OUTPUT_MARGIN}
    if "output_sqnr_db" in trial:
        result["output_sqnr_db"] = {"off": round(choice.sqnr_int8, 3), "on": trial["output_sqnr_db"]}
    if "flash" in trial:
        off = {"flash": choice.memory_int8.flash, "ram": choice.memory_int8.ram}
        result["memory"] = {"off": off, "on": {"flash": trial["flash"], "ram": trial["ram"]}}
    if not trial.get("kept", False) and "reason" in trial:
        result["reason"] = recorded(trial["reason"])
    return result


def recorded(reason: str) -> str:
    """A reason as the JSON keeps it: on one line, at most REASON_CHARS (it may quote the model's names)."""
    return shorten(one_line(reason), REASON_CHARS)
