"""The limits of the work Fixpoint does for a file it was handed.

Every file Fixpoint reads may be hostile: a model whose constant `Loop` runs 10^12 times, a JSON nested
200,000 deep, a symlink to /dev/zero committed to git, a FIFO named like a C source. Each limit below is
stated once, here, and enforced where the work happens; going past one is a clear message naming the
file (and node or key), never a hang, a MemoryError or a RecursionError.

The figures are far above what real models and firmware trees need (noted per limit), so a user meets
them only with a file that is broken or built to hurt.
"""

from __future__ import annotations

MIB = 1024 * 1024

JSON_MAX_DEPTH = 64
"""Nesting of arrays and objects in a JSON file Fixpoint parses. A quant-params file nests 5 deep."""

JSON_MAX_BYTES = 256 * MIB
"""A quant-params or report JSON larger than this is refused (a 1M-parameter model's is about 20 MB)."""

SOURCE_MAX_BYTES = 64 * MIB
"""A text file the language server or `fixpoint check` reads whole (C source, build file, JSON); larger
ones are skipped with a finding. A generated weights file of a big model is tens of MB."""

MODEL_MAX_BYTES = 2048 * MIB
"""An ONNX file (protobuf's own limit is 2 GiB; larger models keep their weights in external data)."""

FOLD_MAX_ELEMENTS = 16 * MIB
"""Elements of one tensor computed by constant folding at import (64 MB of float32); the largest
weight tensor of a microcontroller model is well under 1M elements."""

FOLD_MAX_TOTAL_ELEMENTS = 64 * MIB
"""Elements of all tensors constant folding computes for one model."""

FOLD_MAX_OPERATIONS = 1 << 31
"""Arithmetic operations (about 2 s of numpy) that constant folding may spend on one model; the
constants of a real model take under a million."""

FOLD_MAX_LOOP_ITERATIONS = 4096
"""Iterations of a constant `Loop` (or `Scan`) that import-time folding may execute."""

ACTIVATION_MAX_ELEMENTS = 16 * MIB
"""Elements of one activation tensor (16 MB in int8, more than any Cortex-M's RAM): a larger one comes
from a broken or hostile model (a Pad of 40000 rows), and onnxruntime would allocate it for every
calibration sample."""

WALK_MAX_DEPTH = 64
"""Folder depth below a workspace root that the index walks; deeper folders are skipped with a note."""

WALK_MAX_FILES = 200_000
"""Entries a workspace walk looks at before it stops with a note (a Linux kernel tree has ~80,000)."""

IMAGE_MAX_PIXELS = 64 * MIB
"""Pixels of one calibration image before it is decoded (Pillow's decompression-bomb guard, tightened
to an error): 8192 x 8192."""

FIRMWARE_OUTPUT_MAX_BYTES = 64 * MIB
"""Output a firmware run may print before it is stopped (a verify transcript is 2 hex digits per
activation byte per case; ds_cnn_s with 100 cases writes about 14 MB)."""

NAME_MAX_CHARS = 256
"""Characters of a node or tensor name shown in generated C comments, the firmware's layer names and
messages; longer names are shortened with an ellipsis (they stay unique through their symbols)."""

MAX_TEST_CASES = 10_000
"""Test cases built into one firmware image (each is a const array of the input's size; 10,000 cases of
a 1 KB input already need 10 MB of flash, beyond every Cortex-M part)."""

TOML_MAX_BYTES = 1 * MIB
"""A fixpoint.toml larger than this is refused (a real one is under 2 KB)."""

DATA_MAX_BYTES = 1024 * MIB
"""An array of samples (.npy, or `x` in an .npz) larger than this is refused before it is read or
inflated (a calibration set for a microcontroller model is megabytes; 1 GiB of float32 is 256M values,
and the float32 copy doubles it)."""

DATA_MAX_ABS = 1e30
"""Sample values at or beyond this magnitude are refused: no int8 scale can represent them (the
quant-params JSON accepts scales up to 1e30), and float32 arithmetic on them overflows to infinity."""
