"""import_torch and load_torch_checkpoint (skipped when the optional torch extra is not installed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quantcore.errors import ModelError, UnsupportedError
from quantcore.ir import Op
from tests import needs

torch = needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")

from quantcore.importers import import_torch, load_torch_checkpoint  # noqa: E402

from .models import run_ort  # noqa: E402
from .torch_nets import build  # noqa: E402


def _sequential() -> torch.nn.Module:
    """The Conv-BN-ReLU-MaxPool-Flatten-Linear network with non-trivial BatchNorm statistics, in training
    mode (the import restores it)."""
    return build("test_torch_sequential").train()


def test_sequential_imports_as_the_expected_node_sequence() -> None:
    net = _sequential()
    x = torch.randn(1, 3, 8, 8)
    g = import_torch(net, x)
    # Both exporters fold the BatchNorm into the convolution in eval mode.
    assert [n.op for n in g.nodes] == [Op.CONV2D, Op.RELU, Op.MAX_POOL, Op.RESHAPE, Op.FULLY_CONNECTED]
    conv, _, pool, flat, fc = g.nodes
    assert (
        conv.attrs["pads"] == (1, 1, 1, 1)
        and pool.attrs["kernel"] == (2, 2)
        and flat.attrs["shape"] == (1, 128)
    )
    assert g.inputs == ("input",) and g.outputs == ("output",) and g.tensor("output").shape == (1, 10)
    assert g.meta["format"] == "torch" and g.meta["source"] == "torch:Sequential" and g.name == "Sequential"
    assert np.array_equal(g.constant(fc.inputs[1]), net[5].weight.detach().numpy())
    assert net.training, "the module's training mode is restored"


def test_exported_model_matches_torch() -> None:
    from quantcore.importers.torch import export_onnx

    net = _sequential().eval()
    x = torch.randn(2, 3, 8, 8)
    import onnx

    m = onnx.load_from_string(export_onnx(net, x))
    (y,) = run_ort(m, {"input": x.numpy()})
    with torch.no_grad():
        expected = net(x).numpy()
    # BatchNorm folded into the weights by the exporter: float32 rounding differs slightly.
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    assert import_torch(net, x).tensor("input").shape == (2, 3, 8, 8)


def test_unsupported_layer_names_the_node() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sigmoid())
    with pytest.raises(ModelError, match="Sigmoid is not supported: CMSIS-NN has no int8 sigmoid"):
        import_torch(net, torch.randn(1, 4))


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    net = _sequential()
    path = tmp_path / "net.pt"
    torch.save({"state_dict": net.state_dict(), "epoch": 3}, path)
    state = load_torch_checkpoint(str(path))
    assert set(state) == set(net.state_dict())
    assert torch.equal(state["0.weight"], net[0].weight)


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("pickled code ran",))


def test_checkpoint_with_pickled_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    torch.save({"x": _Payload()}, path)
    with pytest.raises(ModelError, match="weights_only=True"):
        load_torch_checkpoint(str(path))
    with pytest.raises(ModelError, match="no such checkpoint"):
        load_torch_checkpoint(str(tmp_path / "absent.pt"))


# -- the exporter: torch's default, the TorchScript one as the fallback, both quiet ----------------------


class _Branchy(torch.nn.Module):
    """A branch on the data: torch.export refuses it, the TorchScript exporter traces the branch taken."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        with torch.no_grad():
            self.conv.weight.fill_(0.1), self.conv.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) if y.sum() > 0 else y


class _Bessel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)


class _ChannelMean(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(1, keepdim=True)


def test_the_default_exporter_runs_and_says_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    notes: list[str] = []
    g = import_torch(net, torch.zeros(1, 1, 6, 6), note=notes.append)
    # opset 20: the dynamo exporter's ReduceMean + Reshape, imported as the pool TorchScript's would be.
    assert g.meta["opset"] == 20 and [n.op for n in g.nodes] == [Op.CONV2D, Op.GLOBAL_AVG_POOL, Op.RESHAPE]
    assert notes == [] and capfd.readouterr() == ("", "")  # no "[torch.onnx] Obtain model graph..."


def test_the_torchscript_exporter_runs_when_the_default_fails_with_a_one_line_note(
    capfd: pytest.CaptureFixture[str],
) -> None:
    g = import_torch(_Branchy(), torch.ones(1, 1, 5, 5))
    assert g.meta["opset"] == 17 and [n.op for n in g.nodes] == [Op.CONV2D, Op.RELU]
    out, err = capfd.readouterr()
    assert out == "" and err.count("\n") == 1
    assert re.fullmatch(
        r"fixpoint: note: torch:_Branchy: torch's default ONNX exporter failed: <class '[\w.]+"
        r"GuardOnDataDependentSymNode'>: Could not guard on data-dependent expression .*;"
        r" exported with the TorchScript exporter \(dynamo=False\)\n",
        err,
    ), err


def test_without_onnxscript_the_torchscript_exporter_runs_with_a_note() -> None:
    script = (
        "import sys; sys.modules['onnxscript'] = None  # as if not installed\n"
        "import torch\n"
        "from quantcore.importers import import_torch\n"
        "net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU())\n"
        "g = import_torch(net, torch.zeros(1, 1, 5, 5))\n"
        "print(g.meta['opset'], [n.op.name for n in g.nodes])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout == "17 ['CONV2D', 'RELU']\n"
    assert done.stderr == (
        "fixpoint: note: torch:Sequential: torch's default ONNX exporter needs onnxscript, which is not"
        " installed (pip install onnxscript); exported with the TorchScript exporter (dynamo=False)\n"
    )


def test_when_both_exporters_fail_one_error_says_why_each_did(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ModelError) as info:
        import_torch(_Bessel(), torch.zeros(1, 4))
    assert re.fullmatch(
        r"torch:_Bessel: torch's default ONNX exporter failed: <class '[\w.]+DispatchError'>: No ONNX"
        r" function found for .*bessel_j0.*; the TorchScript exporter \(dynamo=False\) failed too:"
        r" Exporting the operator 'aten::special_bessel_j0' to ONNX opset version 17 is not supported",
        str(info.value),
    ), str(info.value)
    assert capfd.readouterr() == ("", "")  # not even the TorchScript exporter's C++ log of the graph


def test_a_module_that_fails_on_its_example_input_is_a_model_error() -> None:
    net = torch.nn.Linear(4, 2)
    with pytest.raises(ModelError) as info:
        import_torch(net, torch.zeros(1, 3))
    assert str(info.value).startswith("torch:Linear: the module fails on the example input: mat1 and mat2")


def test_a_mean_over_channels_is_told_what_it_does_not_to_use_adaptive_pooling() -> None:
    with pytest.raises(UnsupportedError) as info:
        import_torch(_ChannelMean(), torch.zeros(1, 1, 6, 6))
    assert info.value.op_type == "ReduceMean"
    assert info.value.reason.startswith(
        "It averages over axes [1] of its 4-D input of shape (1, 4, 4, 4) (keepdims=1). ReduceMean maps"
    )
    assert "a mean over the channels is a 1x1 convolution whose weights are all 1/C" in info.value.reason


def test_the_importers_and_an_onnx_command_do_not_import_torch(tmp_path: Path) -> None:
    from .test_onnx_ops import _cnn

    (tmp_path / "m.onnx").write_bytes(_cnn()[0])
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 12, 12), np.float32))
    script = (
        "import sys\n"
        "import quantcore.importers, quantcore.importers.torch, quantcore.importers.onnx\n"
        "from quantcore import cli\n"
        f"assert cli.main(['quantize', {str(tmp_path / 'm.onnx')!r}, '--calib', {str(tmp_path / 'x.npy')!r},"
        f" '-o', {str(tmp_path / 'p.json')!r}]) == 0\n"
        "print(sorted(m for m in ('torch', 'onnxscript') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.endswith("\n[]\n")  # torch stays unimported: it takes seconds to import, is optional
