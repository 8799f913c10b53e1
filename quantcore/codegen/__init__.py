"""C code generation: a quantized graph -> readable C sources that call CMSIS-NN (see generate.py)."""

from quantcore.codegen.errors import CodegenError, HandEditedError
from quantcore.codegen.generate import GenerateResult, Sources, generate

__all__ = ["CodegenError", "GenerateResult", "HandEditedError", "Sources", "generate"]
