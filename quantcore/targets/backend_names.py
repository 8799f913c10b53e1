"""The flash backends' names, apart from the backends themselves: fixpoint.toml's reader (and with it
the language server) needs the names, not the build and process machinery behind them."""

from __future__ import annotations

import enum


class BackendName(enum.Enum):
    GDB = "gdb"
    PYOCD = "pyocd"
    OPENOCD = "openocd"
    JLINK = "jlink"
