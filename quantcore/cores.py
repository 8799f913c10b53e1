"""The processor cores Fixpoint generates for, and which CMSIS-NN code path each one compiles.

CMSIS-NN picks its implementation per kernel from the compiler's feature macros: `__ARM_FEATURE_MVE`
(Helium, Cortex-M55/M85) selects the MVE paths, `__ARM_FEATURE_DSP` (Cortex-M4/M7/M33) the DSP paths,
anything else (the host, Cortex-M0/M3) the pure-C paths. Results are bit-exact across the three, but the
scratch buffers the kernels ask for (`*_get_buffer_size`) differ, so sizes are computed for the core.
"""

from __future__ import annotations

import enum

from quantcore.errors import InputError


class UnknownCoreError(InputError):
    """A core name that is not one of Core's labels."""


class Extension(enum.Enum):
    """The CMSIS-NN code path a core compiles."""

    NONE = "none"  # pure C
    DSP = "dsp"
    MVE = "mve"


class Core(enum.Enum):
    """A processor core: its CMSIS-NN code path and the compiler flags that select it."""

    HOST = ("host", Extension.NONE, ())
    CORTEX_M0 = ("cortex-m0", Extension.NONE, ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"))
    CORTEX_M3 = ("cortex-m3", Extension.NONE, ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"))
    CORTEX_M4 = (
        "cortex-m4",
        Extension.DSP,
        ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
    )
    CORTEX_M7 = (
        "cortex-m7",
        Extension.DSP,
        ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"),
    )
    CORTEX_M33 = (
        "cortex-m33",
        Extension.DSP,
        ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
    )
    CORTEX_M55 = ("cortex-m55", Extension.MVE, ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"))

    def __init__(self, label: str, extension: Extension, cflags: tuple[str, ...]) -> None:
        self.label = label
        self.extension = extension
        self.cflags = cflags

    @classmethod
    def from_label(cls, label: str) -> Core:
        for core in cls:
            if core.label == label:
                return core
        known = ", ".join(c.label for c in cls)
        raise UnknownCoreError(f"unknown core {label!r}; known cores: {known}")
