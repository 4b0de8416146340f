"""The kernel code TUI (Textual): ``kernel-code optimize`` without ``--headless``, ``resume`` and ``view``.

The app is ``kernel_code.tui.app.KernelCodeApp``; the pure session model is ``kernel_code.tui.state``.
Nothing is imported here, so that the CLI can reach ``kernel_code.tui.launch`` without loading Textual.
"""

import sys

from openkernel.errors import ConfigError

__all__ = ["require_terminal"]


def require_terminal() -> None:
    """The TUI needs a terminal: say so in one line, with the fix, before a session directory is made."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError("the TUI needs a terminal (stdin or stdout is not one): pass --headless to print progress")
