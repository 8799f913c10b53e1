"""The compilers and tools a target needs, found on PATH, with one clear message when one is missing.

Cortex-M targets need the GNU Arm embedded toolchain and newlib (Debian: gcc-arm-none-eabi and
libnewlib-arm-none-eabi); the QEMU targets need qemu-system-arm, and the GDB-stub flash path
gdb-multiarch. The host target needs plain gcc. Every lookup names the package that provides the tool,
so a fresh machine is one `apt-get install` away from working.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

from quantcore.cores import Core
from quantcore.targets import process
from quantcore.targets.errors import ToolchainNotFound

ARM_PACKAGES = "gcc-arm-none-eabi libnewlib-arm-none-eabi"
"""The Debian/Ubuntu packages that give arm-none-eabi-gcc and its C library."""
QUERY_TIMEOUT_S = 30.0
"""A question put to the compiler (where is libc.a?) that takes longer is answered 'no'."""


@dataclass(frozen=True)
class Toolchain:
    """The C toolchain for one core: a compiler driver and the binutils used around it."""

    prefix: str
    """"" for the host's gcc, "arm-none-eabi-" for Cortex-M."""

    @property
    def cc(self) -> str:
        return f"{self.prefix}gcc"

    @property
    def cxx(self) -> str:
        return f"{self.prefix}g++"

    @property
    def size(self) -> str:
        return f"{self.prefix}size"

    @property
    def objcopy(self) -> str:
        return f"{self.prefix}objcopy"

    @property
    def cross(self) -> bool:
        return bool(self.prefix)


def toolchain_for(core: Core) -> Toolchain:
    return Toolchain("" if core is Core.HOST else "arm-none-eabi-")


def require_toolchain(core: Core) -> Toolchain:
    """The toolchain for `core`, checked: its compiler runs and (for Cortex-M) newlib's libc.a is there."""
    chain = toolchain_for(core)
    if not chain.cross:
        require_tool("gcc", "gcc")
        return chain
    for tool in (chain.cc, chain.size, chain.objcopy):
        require_tool(tool, ARM_PACKAGES)
    if not _has_newlib(chain.cc):
        raise ToolchainNotFound(
            f"{chain.cc} is installed but cannot find newlib's libc.a; install it with "
            f"`apt-get install libnewlib-arm-none-eabi` (packages: {ARM_PACKAGES})"
        )
    return chain


def require_tool(name: str, package: str) -> str:
    """The full path of `name` on PATH, else ToolchainNotFound saying which package to install."""
    found = shutil.which(name)
    if found is None:
        raise ToolchainNotFound(
            f"{name} is not installed (not found on PATH); install it with `apt-get install {package}`"
        )
    return found


@functools.lru_cache(maxsize=8)
def _has_newlib(cc: str) -> bool:
    # gcc prints the bare name back when the file is not in its library search path.
    done = process.run_capped([cc, "-print-file-name=libc.a"], QUERY_TIMEOUT_S)
    path = done.stdout.decode("utf-8", "replace").strip()
    return done.returncode == 0 and Path(path).is_absolute() and Path(path).is_file()
