"""C code generation: a quantized graph -> readable C sources that call CMSIS-NN (see generate.py).

The package imports nothing heavy: the language server reads generated headers through codegen.files
on every start, and generate (jinja2, the quantizer, the params schema) is imported where it is used:
`from quantcore.codegen.generate import generate`.
"""

from quantcore.codegen.errors import CodegenError, HandEditedError

__all__ = ["CodegenError", "HandEditedError"]
