"""import_torch and load_torch_checkpoint (skipped when the optional torch extra is not installed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantcore.errors import ModelError
from quantcore.ir import Op

torch = pytest.importorskip("torch", reason="torch is an optional extra: pip install 'fixpoint[torch]'")

from quantcore.importers import import_torch, load_torch_checkpoint  # noqa: E402

from .models import run_ort  # noqa: E402


def _sequential() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 10),
    )
    with torch.no_grad():  # non-trivial BatchNorm statistics
        net[1].running_mean.uniform_(-1, 1)
        net[1].running_var.uniform_(0.5, 2)
    return net.train()


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
