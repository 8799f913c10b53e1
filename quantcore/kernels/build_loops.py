"""Build a module's numba loops ahead of time into a Python extension module (quantcore.kernels.jit runs
this in a child process):

    python -m quantcore.kernels.build_loops MODULE NAME FOLDER < exports.json

exports.json lists [name, function, numba signature] triples, `function` one of MODULE's njit functions;
the extension NAME, with a function `name` per triple, is written into FOLDER. numba.pycc compiles them
and the C compiler links them.

The code is built for this machine's CPU, with the instruction set extensions numba's JIT would use:
pycc takes the CPU's name ("host") but leaves its extensions to the name's defaults, which a virtual
machine that hides some of them (AVX-512 is often hidden) does not have - the module would then stop on
an illegal instruction. So the AOT code generator is given the host's extensions as the JIT's is.
And the functions release the GIL while they run, as the JIT's `nogil=True` loops do (evaluate sums one
part's figures in a thread of its own while the kernels run the next part): pycc has no option for it,
so its compile flags are given numba's own release_gil.
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from typing import Any


def main(argv: list[str]) -> int:
    module_name, name, folder = argv
    exports = json.loads(sys.stdin.read())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc's pending deprecation: jit falls back when it is gone
        pycc: Any = importlib.import_module("numba.pycc")
        compiler: Any = importlib.import_module("numba.pycc.compiler")
        codegen: Any = importlib.import_module("numba.core.codegen")

    class NoGil(compiler.Flags):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    def host_features(generator: Any) -> str:
        return str(generator._get_host_cpu_features())

    codegen.AOTCPUCodegen._customize_tm_features = host_features
    compiler.Flags = NoGil
    module = importlib.import_module(module_name)
    cc = pycc.CC(name, source_module=module)
    cc.output_dir = folder
    cc.target_cpu = "host"
    for export, function, signature in exports:
        cc.export(export, signature)(getattr(module, function).py_func)
    cc.compile()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
