"""Stopping llama.cpp inside one evaluation: its abort callback (`llama_set_abort_callback`, asked by the
compute thread between two nodes of the graph) gives the caller's `beat` a chance every `CHECK_S`.

Slices alone bound a stop by one slice's time, and a slice is sized from the speed just measured; on
busy cores one llama_decode of even a few tokens can take seconds (its threads wait for the cores), and
small slices make llama.cpp slow for everyone. With the callback a stop lands within a node (~ms) whatever
the slice, so slices can stay large enough to be efficient (docs/chat.md: Ctrl-C within a second).

`beat` raises to stop (the chat's Ctrl-C). An exception cannot cross the C callback, so the watch keeps it,
answers "abort", and `raise_stopped` raises it again once llama_decode has returned its "aborted" code.
What the aborted call had evaluated is not counted (`Llama.eval` counts a batch only after it decoded), and
the next `Llama.eval` removes its cells from the KV cache first (`kv_cache_seq_rm` from `n_tokens` on)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final

log = logging.getLogger(__name__)

CHECK_S: Final = 0.05  # how often the compute thread asks `beat` (each ask takes the GIL: a few us)


class AbortWatch:
    """A context in which llama.cpp's evaluations on `llama` ask `beat` between graph nodes."""

    def __init__(self, llama: Any, beat: Callable[[], None]) -> None:
        self._llama, self._beat = llama, beat
        self._stopped: BaseException | None = None
        self._last = time.monotonic()
        self._callback: Any = None

    def __enter__(self) -> AbortWatch:
        import llama_cpp

        context = _context_pointer(self._llama)
        if context is not None:
            self._callback = llama_cpp.ggml_abort_callback(self._asked)
            llama_cpp.llama_set_abort_callback(context, self._callback, None)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._callback is None:
            return
        import llama_cpp

        context = _context_pointer(self._llama)
        if context is not None:  # no callback outside the watch: generation beats at each token instead
            llama_cpp.llama_set_abort_callback(context, llama_cpp.ggml_abort_callback(), None)
        self._callback = None

    def raise_stopped(self) -> None:
        """Raise what `beat` raised inside an evaluation, if it did (else nothing: the caller re-raises
        llama.cpp's own error)."""
        if self._stopped is not None:
            stopped, self._stopped = self._stopped, None
            raise stopped

    def _asked(self, _data: Any) -> bool:
        try:  # all of it: a signal's exception (Ctrl-C in `vibe run`) may be raised at any line here
            if self._stopped is not None:
                return True
            now = time.monotonic()
            if now - self._last < CHECK_S:
                return False
            self._last = now
            self._beat()
        except BaseException as exc:  # the caller's stop, kept for raise_stopped (it cannot cross C)
            self._stopped = exc
            return True
        return False


def _context_pointer(llama: Any) -> Any:
    """The `llama_context *` of a `llama_cpp.Llama` (None for a stand-in without one)."""
    internal = getattr(llama, "_ctx", None)
    return getattr(internal, "ctx", None)
