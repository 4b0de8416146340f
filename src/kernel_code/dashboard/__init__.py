"""The personal web dashboard (Plotly Dash): one page per module, figures as pure functions of session data.

Dash and plotly are imported only when a dashboard starts (``kernel-code dashboard`` or the TUI's
``d`` key), so that the commands that print stay quick.
"""
