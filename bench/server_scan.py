"""How long the language server's C scanner takes on a big generated weights file (not a test: no asserts).

    .venv/bin/python bench/server_scan.py            # 20 MB and 50 MB files
    .venv/bin/python bench/server_scan.py 100        # sizes in MB

Writes a model_data.c-like text (a header comment, per-array comments, 16 values a line, arrays of
~1 MB) in memory and prints the time of scan_c (masking, directives, the statement walk, line index),
of the first lazy array_values on the largest array, and the facts found.
"""

from __future__ import annotations

import random
import sys
import time

from fixpoint_server.parse.c_source import array_values, scan_c

ARRAY_BYTES = 1 << 20


def weights_file(megabytes: float, seed: int = 0) -> str:
    rng = random.Random(seed)
    line = ", ".join(str(rng.randint(-127, 127)) for _ in range(16)) + ",\n"
    lines_per_array = ARRAY_BYTES // len(line)
    body = line * lines_per_array
    parts = [
        "/*\n * model_data.c: weights\n * content-sha256: " + "0" * 64 + "\n */\n#include <stdint.h>\n\n"
    ]
    size, index = 0, 0
    while size < megabytes * 1e6:
        count = lines_per_array * 16
        parts.append(f"/* layer {index} weights, {count} values */\n")
        parts.append(f"const int8_t model_l{index}_conv_weights[{count}] __attribute__((aligned(16))) = {{\n")
        parts.append(body)
        parts.append("};\n\n")
        size += len(body)
        index += 1
    return "".join(parts)


def main(sizes: list[float]) -> None:
    scan_c(weights_file(0.1))  # the first scan imports quantcore's header reader: not the scanner's time
    for megabytes in sizes:
        text = weights_file(megabytes)
        started = time.perf_counter()
        cfile = scan_c(text)
        scanned = time.perf_counter() - started
        started = time.perf_counter()
        values = array_values(text, cfile.arrays[0])
        parsed = time.perf_counter() - started
        print(
            f"{len(text) / 1e6:6.1f} MB, {text.count(chr(10)):8d} lines: scan_c {scanned * 1000:7.1f} ms"
            f" ({len(cfile.arrays)} arrays); array_values of one {len(values or [])}-value array"
            f" {parsed * 1000:6.1f} ms"
        )


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [20.0, 50.0])
