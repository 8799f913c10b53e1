"""`fixpoint generate --params P [--model M] -o DIR`: the C sources that run the model on CMSIS-NN.

Writes <prefix>.h, <prefix>.c and <prefix>_data.c. A file edited by hand since it was generated stops
the run (nothing written) unless --force, which keeps the edited file as <name>.bak; unchanged inputs
rewrite nothing. Defaults (model, params, output folder, target core, alignment) come from fixpoint.toml.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from quantcore.commands import _args
from quantcore.commands import _firmware as fw
from quantcore.commands._args import Subcommands


def register(sub: Subcommands) -> None:
    p = sub.add_parser("generate", help="generate the model's C sources (CMSIS-NN calls, weights, arena)")
    p.add_argument("--params", help="quant-params JSON (default: fixpoint.toml's params)")
    p.add_argument("--model", help="float ONNX model (default: fixpoint.toml's, else the one the JSON names)")
    p.add_argument("-o", "--output", type=Path, help="output folder (default: fixpoint.toml's generated)")
    p.add_argument(
        "--prefix", type=_args.identifier, default="model", help="file and symbol prefix (default: model)"
    )
    p.add_argument("--core", help="Cortex-M core the scratch sizes are for (default: the target's core)")
    p.add_argument("--target", help="take the core from this target (default: fixpoint.toml's target)")
    p.add_argument(
        "--alignment", type=_args.alignment, help="byte alignment of arrays and arena (default 16)"
    )
    p.add_argument("--force", action="store_true", help="overwrite hand-edited files (keeps <name>.bak)")
    p.add_argument("--project", type=Path, help="fixpoint.toml to read (default: ./fixpoint.toml if present)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run, cases=None, build_dir=None)


def run(args: argparse.Namespace) -> int:
    return fw.guarded("generate", args, lambda: _generate(args))


def _generate(args: argparse.Namespace) -> int:
    from quantcore.codegen.generate import Sources, generate
    from quantcore.cores import Core, UnknownCoreError

    ctx = fw.resolve(args)
    out = fw.folder_option("-o", args.output) if args.output else ctx.project.generated
    model = fw.load_model(ctx, required=True, recorded_model=True)
    assert model is not None
    try:
        core = Core.from_label(args.core) if args.core else ctx.target.core
    except UnknownCoreError as exc:
        raise fw.BadInput(str(exc)) from None
    result = generate(
        model.qgraph,
        out,
        prefix=args.prefix,
        core=core,
        alignment=args.alignment or ctx.project.alignment,
        force=args.force,
        sources=Sources(Path(model.params_file), Path(model.loaded.path)),
    )
    plan = result.plan
    if args.json:
        print(json.dumps({
            "output": str(out), "core": core.label,
            "files": [{"path": str(f.path), "outcome": f.outcome.value,
                       "backup": str(f.backup) if f.backup else None} for f in result.files],
            "layers": len(plan.layers), "arena_bytes": plan.arena.arena_bytes,
            "activation_bytes": plan.arena.tensor_bytes, "scratch_bytes": plan.scratch_bytes,
            "weight_bytes": plan.weight_bytes,
        }))  # fmt: skip
        return fw.EXIT_PASS
    for f in result.files:
        extra = f" (old file kept as {f.backup})" if f.backup else ""
        print(f"{f.outcome.value:>9}  {f.path}{extra}")
    print(
        f"{len(plan.layers)} layers for {core.label}: arena {plan.arena.arena_bytes} B (activations"
        f" {plan.arena.tensor_bytes} B unshared), scratch {plan.scratch_bytes} B,"
        f" constants {plan.weight_bytes} B"
    )
    return fw.EXIT_PASS
