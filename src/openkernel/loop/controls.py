"""Controls: how a user steers a running loop from another thread (the TUI, a signal handler, a test).

Every method takes one lock, so that the TUI thread and the loop thread never see a half-made change.
The loop reads them between iterations: a pause, a stop, a hint or a backend switch made while a
kernel is being proposed or evaluated takes effect when that iteration has been decided.
"""

from __future__ import annotations

import threading

from openkernel.errors import ConfigError

__all__ = ["BACKENDS", "Controls"]

BACKENDS = ("triton", "cuda")


class Controls:
    """Pause, resume, stop, steer and switch backend; thread-safe."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._paused = False
        self._stop = False
        self._hints: list[str] = []
        self._backend: str | None = None

    # What the user (the TUI) calls.

    def pause(self) -> None:
        with self._changed:
            self._paused = True
            self._changed.notify_all()

    def resume(self) -> None:
        with self._changed:
            self._paused = False
            self._changed.notify_all()

    def stop(self) -> None:
        """Finish after the current iteration (and wake a paused loop to finish)."""
        with self._changed:
            self._stop = True
            self._changed.notify_all()

    def steer(self, hint: str) -> None:
        """A hint the next proposal must take into account."""
        hint = hint.strip()
        if not hint:
            raise ConfigError("a hint needs some text: say what the next kernel should try")
        with self._changed:
            self._hints.append(hint)

    def switch_backend(self, backend: str) -> None:
        """Propose ``backend`` kernels from the next iteration on."""
        if backend not in BACKENDS:
            raise ConfigError(f"unknown backend {backend!r}: use triton or cuda")
        with self._changed:
            self._backend = backend

    # What the loop reads.

    @property
    def is_paused(self) -> bool:
        with self._changed:
            return self._paused

    @property
    def stop_requested(self) -> bool:
        with self._changed:
            return self._stop

    @property
    def pending_backend(self) -> str | None:
        """The backend asked for and not yet taken; ``None``: no switch pending."""
        with self._changed:
            return self._backend

    def wait_while_paused(self, timeout: float | None = None) -> bool:
        """Block until resumed or stopped, at most ``timeout`` seconds; True while still paused."""
        with self._changed:
            self._changed.wait_for(lambda: not self._paused or self._stop, timeout)
            return self._paused and not self._stop

    def take_hints(self) -> tuple[str, ...]:
        """The hints given since the last call, oldest first (each is handed out once)."""
        with self._changed:
            hints, self._hints = tuple(self._hints), []
            return hints

    def take_backend(self) -> str | None:
        """The pending backend switch, cleared (each switch is applied once)."""
        with self._changed:
            backend, self._backend = self._backend, None
            return backend
