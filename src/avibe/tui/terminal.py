"""The chat's terminal driver: Textual's own, told when the terminal goes away.

A terminal that vanishes - its tmux pane or ssh connection closed - hangs up the tty: the process gets
SIGHUP (unless it was started with SIGHUP ignored, or outside the terminal's session), every read of the
tty returns end-of-file at once and every write fails with EIO. Textual alone then reads on in a loop (a
core at ~80% for as long as the process lives), and its writer thread dies at the first failed write, so
the screen's writes block once that thread's queue fills. Here a hang-up is heard three ways - SIGHUP, the
tty reporting POLLHUP, a write failing - and whichever comes first stops the input thread and tells the
app (`HungUp`), which quits; what is written after that goes nowhere.
"""

from __future__ import annotations

import contextlib
import select
import signal
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

WATCH_MS: Final = 500  # the watch thread ends within this once the app leaves the terminal


class HungUp(Message):
    """The terminal is gone: nothing typed will come, nothing drawn is seen."""


class _Output:
    """The screen's output file; after the first failed write (the terminal is gone) the rest are dropped,
    so Textual's writer thread lives on and nothing blocks on it."""

    def __init__(self, file: IO[str], gone: Callable[[], None]) -> None:
        self._file, self._gone, self.dead = file, gone, False

    def write(self, text: str) -> int:
        if not self.dead:
            try:
                return self._file.write(text)
            except OSError:
                self._died()
        return len(text)

    def flush(self) -> None:
        if not self.dead:
            try:
                self._file.flush()
            except OSError:
                self._died()

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return True

    def _died(self) -> None:
        self.dead = True
        self._gone()


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver that posts `HungUp` to the app once, when the terminal goes away."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        if self._file is not None:  # Textual's duck-typed output file (sys.__stderr__), guarded
            self._file = _Output(self._file, self._hung_up_soon)  # type: ignore[assignment]
        self._watching = threading.Event()
        self._gone = False

    def start_application_mode(self) -> None:
        super().start_application_mode()  # type: ignore[no-untyped-call]  # Textual leaves it untyped
        # SIGHUP by default kills the process outright (no step stopped, no lease released); inherited as
        # ignored, it leaves the chat running with no terminal. Either way: quit cleanly instead.
        self._loop.add_signal_handler(signal.SIGHUP, self._hung_up)
        self._watching = threading.Event()
        watch = threading.Thread(
            target=self._watch, args=(self.fileno, self._watching), name="vibe-chat-terminal", daemon=True
        )
        watch.start()

    def stop_application_mode(self) -> None:
        self._watching.set()
        self._loop.remove_signal_handler(signal.SIGHUP)
        super().stop_application_mode()

    def _watch(self, fd: int, stop: threading.Event) -> None:
        """Wait for the tty to hang up: a process the kernel sends no SIGHUP (one outside the terminal's
        session) learns of it here."""
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: poll reports a hang-up or an error only
        while not stop.is_set():
            if poller.poll(WATCH_MS):
                self._hung_up_soon()
                return

    def _hung_up_soon(self) -> None:
        """From any thread: `_hung_up` on the app's loop (Textual's driver is made on it)."""
        with contextlib.suppress(RuntimeError):  # the loop has closed: the app ended already
            self._loop.call_soon_threadsafe(self._hung_up)

    def _hung_up(self) -> None:
        if self._gone:
            return
        self._gone = True
        self.disable_input()  # the input thread stops reading end-of-file in a loop
        self._app.post_message(HungUp())
