"""One rank of the torch.distributed calibration test: `python -m torch.distributed.run --nproc_per_node 2
shard_rank.py MODEL DATA OUT METHOD`. Rank r observes its half of DATA; rank 0 writes the ranges."""

from __future__ import annotations

import json
import sys

import numpy as np
import torch.distributed as dist

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate_distributed
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.data import DataSet


def main() -> None:
    model_path, data_path, out, method = sys.argv[1:5]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x = np.load(data_path)
    part = np.array_split(x, world)[rank]
    model = pipeline.load_model(model_path)
    plan = CalibrationPlan(RangeMethod(Method(method)), batch_size=16)
    calibration, summary = calibrate_distributed(model.graph, model.float_model, DataSet(part, None), plan)
    record = {"ranges": calibration.ranges, "observed": calibration.observed, "samples": summary["samples"]}
    gathered: list[object] = [None] * world
    dist.all_gather_object(gathered, record)
    if rank == 0:
        with open(out, "w") as handle:
            json.dump({"ranks": gathered}, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
