"""The kernel code TUI (Textual): ``kernel-code optimize`` without ``--headless``, ``resume`` and ``view``.

The app is ``kernel_code.tui.app.KernelCodeApp``; the pure session model is ``kernel_code.tui.state``.
Nothing is imported here, so that the CLI can reach ``kernel_code.tui.launch`` without loading Textual.
"""
