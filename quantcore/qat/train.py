"""Quantization-aware training: fine-tune a float model with fake quantization, export the same JSON.

    start = pipeline.quantize(model, calib)       post-training quantization: equalization, bias
                                                  correction and ranges as `fixpoint quantize` picks them
    net = FakeQuantNet(float graph, start ranges) the int8 scheme in floats (quantcore/qat/fake_quant.py)
    train 1-3 epochs, small learning rate         weights (Adam) and activation ranges (LSQ), cosine decay
    quantize_graph(trained graph, learned ranges) the exported integers: what PTQ computes from them

The loss is "distill" (mean squared error to the float model's outputs: no labels needed, and what the
output SQNR measures) or "labels" (cross-entropy on the training labels).

Data parallel under torchrun unchanged: when torch.distributed's environment says WORLD_SIZE > 1, the
process group is initialised (gloo on CPU, nccl on GPUs), the net is wrapped in DistributedDataParallel
and every rank trains on its own slice of each global batch (DistributedSampler): the global batches
are the ones a single process would see, and the gradients their mean. Only rank 0 evaluates and
returns a document to write.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from quantcore.calibrate.calibration import Calibration
from quantcore.data import DataSet
from quantcore.errors import QuantcoreError
from quantcore.ir import Graph, Op
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels.requantize import Rounding
from quantcore.passes.equalize import equalize
from quantcore.qat.fake_quant import FakeQuantNet, QatError
from quantcore.qat.options import LOSSES, QatOptions
from quantcore.quantize.bias_correction import corrected_bias
from quantcore.quantize.document import (
    bias_corrections,
    equalization_applied,
    float_graph_for,
    from_document,
    to_document,
)
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.verify.evaluate import float_outputs, int8_outputs
from quantcore.verify.metrics import output_sqnr_db
from quantcore.verify.report import json_db

if TYPE_CHECKING:  # an annotation only: the pipeline is imported where it runs
    from quantcore.pipeline import LoadedModel

SCORE_SAMPLES = 256
"""The calibration samples both the start and the result are scored on (pipeline.SELECTION_SAMPLES)."""


class QatTrainingError(QuantcoreError):
    """Training that cannot start or did not produce usable parameters (the message says what to do)."""


@dataclass
class QatResult:
    rank: int
    """This process's rank; only rank 0 has a document."""
    document: dict[str, Any] | None = None
    """The quant-params document (its "finetuned" entry still lacks the sidecar's name and hash:
    document.write_finetuned adds them when it writes both files)."""
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    """The fine-tuned float constants (the sidecar's arrays), by IR tensor name."""
    qgraph: Graph | None = None
    net: FakeQuantNet | None = None
    """The trained module (rank 0), whose integers the exported graph's must equal."""
    start_document: dict[str, Any] | None = None
    epoch_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def qat(model: LoadedModel, train: DataSet, calib: DataSet, options: QatOptions | None = None) -> QatResult:
    """Fine-tune `model` (a pipeline.LoadedModel) on `train`, starting from PTQ on `calib`."""
    from quantcore import pipeline

    options = options or QatOptions()
    if options.loss not in LOSSES:
        raise QatTrainingError(f"loss {options.loss!r}: expected one of {', '.join(LOSSES)}")
    if options.loss == "labels" and train.y is None:
        raise QatTrainingError(
            f"{train.source}: --loss labels needs labels (an array y in the .npz); use --loss distill"
        )
    if options.epochs < 1:
        raise QatTrainingError(f"epochs must be at least 1, got {options.epochs}")
    start_options = options.start or pipeline.QuantizeOptions()
    if start_options.int16_layers or start_options.int16_auto or start_options.int16_output:
        raise QatTrainingError("quantization-aware training runs int8 only: drop --int16")
    # Fake quantization learns one range per activation tensor and trains int8 logits: per-channel scales
    # into depthwise layers (quantcore/quantize/channel_scales.py) would not survive the export, and no
    # int16 output is trained, so the start has neither (quantize's automatic choices are left out).
    start_options = dataclasses.replace(start_options, dw_channel_scales=False, int16_output=False)
    with _process_group() as (rank, world):
        if options.batch_size % world:
            raise QatTrainingError(
                f"the batch size {options.batch_size} must split evenly over {world} processes"
            )
        started = time.perf_counter()
        start = pipeline.quantize(model, calib, start_options).document
        student_graph, teacher_graph, frozen = _start_graphs(model.graph, start)
        ranges = _start_ranges(student_graph, start)
        per_channel = start["scheme"]["weights"] == "per-channel"
        device = _device()
        try:
            net = FakeQuantNet(student_graph, ranges, per_channel, frozen).to(device)
            teacher = FakeQuantNet(teacher_graph, ranges, per_channel, frozen, quantize=False).to(device)
        except QatError as exc:
            raise QatTrainingError(f"{model.path.name}: {exc}") from exc
        data = train.head(options.samples) if options.samples else train
        checkpoints = _Checkpoints(net, student_graph, start, model, calib) if rank == 0 else None
        if checkpoints is not None:
            checkpoints.score(0)
        after_epoch = None if checkpoints is None else checkpoints.score
        losses, samples = _train(net, teacher, data, options, rank, world, device, after_epoch)
        result = QatResult(rank, epoch_losses=losses)
        if checkpoints is not None:
            checkpoints.restore_best()
            _export(result, net, checkpoints, start, model, options, world, samples)
        result.seconds = time.perf_counter() - started
        return result


# -- the start: PTQ's document -> the float graphs and ranges training begins with -------------------


def _start_graphs(graph: Graph, start: Mapping[str, Any]) -> tuple[Graph, Graph, frozenset[str]]:
    """(student, teacher, frozen constants). Both graphs are the float graph the PTQ parameters belong
    to (equalized when chosen, narrowing average pools as depthwise convolutions); the student starts
    from the bias-corrected biases when PTQ chose them, the teacher keeps the float model's function."""
    teacher = float_graph_for(graph, start)
    # The model's constants (equalized ones have new names) train; the 1/(kh*kw) weights of the average
    # pools the quantizer runs as depthwise convolutions stay: readers of the JSON make them again.
    model_constants = (equalize(graph).graph if equalization_applied(start) else graph).tensors
    frozen = frozenset(n for n, t in teacher.tensors.items() if t.is_constant and n not in model_constants)
    student = teacher
    for name, correction in bias_corrections(start).items():
        node = teacher.node(name)
        if len(node.inputs) > 2 and node.inputs[2]:
            bias = teacher.tensor(node.inputs[2])
            values = corrected_bias(teacher.constant(bias.name), correction).astype(np.float32)
            student = student.with_tensors(bias.evolve(data=values))
    return student, teacher, frozen


def _start_ranges(graph: Graph, start: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    tensors = start["tensors"]
    return {
        t.name: (tensors[t.name]["range"]["min"], tensors[t.name]["range"]["max"])
        for t in graph.activations()
        if "range" in tensors.get(t.name, {})
    }


# -- training ----------------------------------------------------------------------------------------


def _train(
    net: FakeQuantNet,
    teacher: FakeQuantNet,
    data: DataSet,
    options: QatOptions,
    rank: int,
    world: int,
    device: torch.device,
    after_epoch: Callable[[int], None] | None = None,
) -> tuple[list[float], int]:
    """Train in place; returns the mean loss of each epoch and the samples each epoch trains on."""
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.manual_seed(options.seed)
    # a copy: a data set's samples are read-only (quantcore.data), and torch warns of sharing those
    x = torch.tensor(np.asarray(to_firmware(net.graph, net.graph.inputs[0], data.x), np.float32))
    y = torch.as_tensor(data.y if data.y is not None else np.zeros(len(data), np.int64))
    dataset = TensorDataset(x, y)
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset, world, rank, shuffle=True, seed=options.seed
    )
    loader = DataLoader(dataset, batch_size=options.batch_size // world, sampler=sampler, drop_last=True)
    if len(loader) == 0:
        raise QatTrainingError(
            f"{data.source}: {len(data)} training samples do not fill one batch of {options.batch_size}"
        )
    model: torch.nn.Module = net
    # DDP compares each gradient's strides with its bucket's, and a weight dimension of size 1 (OHWI
    # with one input channel) has an arbitrary stride: the mismatch it reports there is harmless.
    warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device] if device.type == "cuda" else None
        )
    optimizer = torch.optim.Adam(
        [
            {"params": list(net.weights), "lr": options.lr},
            {"params": [net.range_offsets], "lr": options.range_lr},
        ]
    )
    steps = options.epochs * len(loader)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps))
    )
    ends_in_softmax = net.graph.nodes[-1].op is Op.SOFTMAX
    epoch_losses = []
    for epoch in range(options.epochs):
        sampler.set_epoch(epoch)
        total, batches = 0.0, 0
        for xb, yb in _progress(
            loader, f"epoch {epoch + 1}/{options.epochs}", options.progress and rank == 0
        ):
            xb, yb = xb.to(device), yb.to(device)
            out = model(xb).reshape(len(xb), -1)
            if options.loss == "labels":
                loss = _label_loss(out, yb, ends_in_softmax)
            else:
                with torch.no_grad():
                    target = teacher(xb).reshape(len(xb), -1)
                loss = torch.nn.functional.mse_loss(out, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            schedule.step()
            total, batches = total + float(loss.detach()), batches + 1
        epoch_losses.append(_mean_over_ranks(total / batches, world))
        if after_epoch is not None:
            after_epoch(epoch + 1)
    return epoch_losses, len(loader) * options.batch_size


def _label_loss(out: torch.Tensor, labels: torch.Tensor, probabilities: bool) -> torch.Tensor:
    if probabilities:  # a softmax output: the loss takes the logarithm of the probabilities
        return torch.nn.functional.nll_loss(torch.log(out.clamp_min(1e-12)), labels)
    return torch.nn.functional.cross_entropy(out, labels)


def _mean_over_ranks(value: float, world: int) -> float:
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t[0]) / world


def _progress(loader: Any, label: str, show: bool) -> Iterator[Any]:
    if not show:
        yield from loader
        return
    from rich.progress import track

    yield from track(loader, description=label, transient=True)


# -- export ------------------------------------------------------------------------------------------


class _Checkpoints:
    """The network after each epoch, exported and scored by the int8 reference on the first calibration
    samples (epoch 0: the start); the best one is what gets exported. Training on its own loss can drift
    where the fake-quantized network and the int8 kernels part (a long deep net accumulates their
    one-code differences), and the calibration samples are the ones PTQ's own choices are scored on."""

    def __init__(
        self, net: FakeQuantNet, graph: Graph, start: Mapping[str, Any], model: Any, calib: DataSet
    ) -> None:
        self.net, self.graph, self.start = net, graph, start
        self.data = calib.head(SCORE_SAMPLES)
        self.reference = float_outputs(model.float_model, model.graph, self.data)
        self.observed = {
            name: (entry["observed"]["min"], entry["observed"]["max"])
            for name, entry in start["tensors"].items()
            if entry.get("kind") == "activation" and "observed" in entry
        }
        self.sqnr: list[float] = []
        self.best_epoch = 0
        self.best: tuple[Graph, dict[str, np.ndarray]] | None = None
        """The best epoch's exported graph and fine-tuned constants."""
        self._best_state: dict[str, Any] = {}

    def score(self, epoch: int) -> None:
        weights = self.weights()
        qgraph = self.quantized(weights)
        value = self.sqnr_of(qgraph)
        self.sqnr.append(value)
        if epoch == 0 or value > self.sqnr[self.best_epoch]:
            self.best_epoch, self.best = epoch, (qgraph, weights)
            self._best_state = copy.deepcopy(self.net.state_dict())

    def sqnr_of(self, qgraph: Graph) -> float:
        return output_sqnr_db([self.reference], [int8_outputs(qgraph, self.data)])

    def restore_best(self) -> None:
        self.net.load_state_dict(self._best_state)

    def weights(self) -> dict[str, np.ndarray]:
        weights = self.net.trained_constants()
        for name, values in weights.items():
            if not np.all(np.isfinite(values)):
                raise QatTrainingError(
                    f"training diverged: {name!r} has non-finite values; lower --lr / --range-lr"
                )
        return weights

    def quantized(self, weights: Mapping[str, np.ndarray]) -> Graph:
        """The network with `weights` and its ranges now, quantized by the PTQ code."""
        graph = self.graph
        trained = graph.with_tensors(*(graph.tensor(n).evolve(data=v) for n, v in weights.items()))
        ranges = self.net.learned_ranges()
        calibration = Calibration(ranges, self.observed, dict.fromkeys(ranges, "qat"))
        config = QuantConfig(
            per_channel=self.start["scheme"]["weights"] == "per-channel",
            rounding=Rounding(self.start["scheme"]["rounding"]),
            lower_pools=False,  # the start graph has them lowered as the PTQ document says
        )
        return quantize_graph(trained, calibration, config)


def _export(
    result: QatResult,
    net: FakeQuantNet,
    checkpoints: _Checkpoints,
    start: Mapping[str, Any],
    model: Any,
    options: QatOptions,
    world: int,
    samples: int,
) -> None:
    """The document of the best checkpoint, with the run and its scores in the "finetuned" entry."""
    assert checkpoints.best is not None  # epoch 0 is always scored
    qgraph, weights = checkpoints.best
    sqnr = {
        "ptq": json_db(checkpoints.sqnr_of(from_document(model.graph, start))),
        "qat": json_db(checkpoints.sqnr[checkpoints.best_epoch]),
    }
    transforms = {key: dict(value) for key, value in start.get("transforms", {}).items()}
    if "bias_correction" in transforms:
        transforms["bias_correction"] = {"mode": transforms["bias_correction"]["mode"], "applied": False}
    finetuned = {
        "method": "qat",
        "epochs": options.epochs,
        "lr": options.lr,
        "range_lr": options.range_lr,
        "batch_size": options.batch_size,
        "samples": samples,
        "loss": options.loss,
        "processes": world,
        "seed": options.seed,
        "start_biases": "corrected" if bias_corrections(start) else "float",
        "output_sqnr_db": sqnr,
        "epoch_output_sqnr_db": [json_db(v) for v in checkpoints.sqnr],
        "kept_epoch": checkpoints.best_epoch,
    }
    result.document = to_document(qgraph, start["calibration"], transforms, finetuned=finetuned)
    result.weights, result.qgraph, result.net = weights, qgraph, net
    result.start_document = dict(start)


# -- processes ---------------------------------------------------------------------------------------


@contextmanager
def _process_group() -> Iterator[tuple[int, int]]:
    """(rank, world size): torch.distributed's when torchrun started several processes, else (0, 1).
    A process group this function initialised is destroyed on the way out."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or not dist.is_available():
        yield 0, 1
        return
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        yield dist.get_rank(), dist.get_world_size()
        dist.barrier()  # rank 0 exports while the others wait
    finally:
        if owned:
            dist.destroy_process_group()


def _device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")
