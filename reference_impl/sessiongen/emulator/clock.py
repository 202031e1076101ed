"""The emulator's virtual clock: seconds since reset, moved only by explicit calls."""

from __future__ import annotations

import threading


class VirtualClock:
    """A thread-safe virtual time source. Requests are stamped with `now()`; nothing in the
    emulator reads the wall clock, so cache lifetimes depend only on `advance`/`set`."""

    def __init__(self, start: float = 0.0) -> None:
        if start < 0:
            raise ValueError("the clock cannot start before 0")
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError("the virtual clock only moves forward with advance()")
        with self._lock:
            self._now += float(seconds)
            return self._now

    def set(self, now: float) -> float:
        """Jump to an absolute time (>= 0) and return it."""
        if now < 0:
            raise ValueError("virtual time cannot be negative")
        with self._lock:
            self._now = float(now)
            return self._now
