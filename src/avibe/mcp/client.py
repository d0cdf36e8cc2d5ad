"""One MCP server's connection, through the official SDK (`mcp`): start, initialise, list its tools (and
list them again on `tools/list_changed`), call them, stop. The SDK is asynchronous and Vibey's tools are
not, so every connection of a session runs on one event loop in a thread of its own (`EventLoop`), and a
call waits for its answer here, in the tool's thread, where it can be bounded and stopped:

- a call past the server's `timeout_s`, or stopped by the session's stop switch (Ctrl-C in the chat) or by
  KeyboardInterrupt (`vibe run`), is cancelled: the SDK sends the server `notifications/cancelled`;
- a server that does not start within `startup_timeout_s`, exits, or closes the connection mid-call is
  `down` with a one-line reason (its last stderr line where it left one); the next call starts it again,
  at most `restarts` times a session;
- what a server prints on stdout that is not MCP is logged and counted (the SDK skips it), its stderr
  goes line by line to Avibe's log (logger `avibe.mcp.server`), never the screen.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from avibe.errors import AvibeError
from avibe.mcp.config import McpServer

log = logging.getLogger(__name__)
server_log = logging.getLogger("avibe.mcp.server")
# The SDK logs a server's non-MCP stdout lines with a traceback: into Avibe's log with the rest, never on
# the screen through Python's last-resort handler when no handler is set up (a library user, a test).
logging.getLogger("mcp").addHandler(logging.NullHandler())
T = TypeVar("T")
State = Literal["not started", "ready", "down", "stopped"]
_POLL_S: Final = 0.05
_STOP_S: Final = 15  # the SDK's own shutdown waits at most ~6.5 s (stdin closed, SIGTERM, SIGKILL)
_LINE_CHARS: Final = 300
CallEnd = Literal["ok", "timeout", "stopped", "down", "error"]


class EventLoop:
    """An asyncio loop in a daemon thread: the home of a session's MCP connections."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="avibe-mcp", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How a call ended: `ok` with the SDK's result, or why not (`detail`, one line)."""

    end: CallEnd
    result: Any = None
    detail: str = ""
    seconds: float = 0.0


class StderrPump:
    """A pipe for a stdio server's stderr: each line goes to Avibe's log; the last is kept for messages."""

    def __init__(self, name: str) -> None:
        self.name, self.last = name, ""
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        threading.Thread(target=self._pump, name=f"avibe-mcp-{name}-stderr", daemon=True).start()

    def _pump(self) -> None:
        with self._reader:
            for raw in self._reader:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.last = line[:_LINE_CHARS]
                    server_log.info("%s: %s", self.name, self.last)

    def close_writer(self) -> None:
        """The server holds its own copy now: closing ours lets the pump see the end when it exits."""
        if not self.writer.closed:
            self.writer.close()


Transport = Callable[["McpConnection"], AbstractAsyncContextManager[tuple[Any, Any]]]


class McpConnection:
    """One server: `start` blocks until it is ready or down; `call` blocks until an answer or an end."""

    def __init__(self, server: McpServer, loop: EventLoop, transport: Transport) -> None:
        self.server, self._loop, self._transport = server, loop, transport
        self.state: State = "not started"
        self.reason = ""  # why it is down, one line
        self.tools: tuple[Any, ...] = ()  # mcp.types.Tool, as the server listed them
        self.starts = 0
        self.junk = 0  # lines on its stdout that were no MCP message
        self.list_changed = False  # it said its tools changed since they were offered
        self.stderr: StderrPump | None = None
        self._session: Any = None
        self._closing: asyncio.Event | None = None
        self._task: concurrent.futures.Future[None] | None = None
        self._running: asyncio.Task[Any] | None = None

    @property
    def restarts_left(self) -> int:
        return max(0, self.server.restarts + 1 - self.starts)

    def start(self) -> bool:
        """Start it (at most 1 + `restarts` times a session); True when it is ready."""
        if self.state == "ready":
            return True
        if self.restarts_left == 0:
            return False
        self.starts += 1
        self.stop_task()
        ready: concurrent.futures.Future[tuple[Any, ...]] = concurrent.futures.Future()
        self._task = self._loop.submit(self._serve(ready))
        try:
            self.tools = ready.result(timeout=self.server.startup_timeout_s)
        except concurrent.futures.TimeoutError:
            return self._down(f"it did not start within {self.server.startup_timeout_s:g} s")
        except Exception as exc:  # the transport's or the SDK's: named in one line, never raised
            return self._down(f"it did not start ({_why(exc)})")
        self.state, self.reason = "ready", ""
        return True

    def _down(self, reason: str) -> bool:
        last = self.stderr.last if self.stderr is not None else ""
        self.state = "down"
        self.reason = f"{reason}; its last stderr line: {last}" if last and last not in reason else reason
        log.warning("MCP server %s: %s", self.server.name, self.reason)
        self.stop_task()
        return False

    async def _serve(self, ready: concurrent.futures.Future[tuple[Any, ...]]) -> None:
        from mcp import ClientSession

        self._closing = asyncio.Event()
        self._running = asyncio.current_task()
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(self))
                session = ClientSession(read, write, message_handler=self._on_message)
                await stack.enter_async_context(session)
                await session.initialize()
                tools = await _all_tools(session)
                self._session = session
                ready.set_result(tools)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("start cancelled"))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            self._session = None
            if self.stderr is not None:
                self.stderr.close_writer()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line on stdout that is no MCP message: skipped
            self.junk += 1
            log.warning("MCP server %s printed something that is not MCP on stdout (%d)", self.server.name,
                        self.junk)  # fmt: skip
            return
        method = getattr(getattr(message, "root", message), "method", "")
        if method == "notifications/tools/list_changed" and self._session is not None:
            self.list_changed = True
            try:
                self.tools = await _all_tools(self._session)
            except Exception as exc:  # the listing stays as it was: logged
                log.warning("MCP server %s: listing its changed tools failed: %s", self.server.name, exc)

    def call(self, tool: str, arguments: dict[str, Any], stop: threading.Event | None) -> CallOutcome:
        """Call `tool`; starts the server first when it is down and may be restarted."""
        if self.state != "ready" and not self.start():
            return CallOutcome("down", detail=self.reason)
        session = self._session
        if session is None:
            self._down("the connection closed")
            return CallOutcome("down", detail=self.reason)
        started = time.monotonic()
        future = self._loop.submit(_awaited(session.call_tool(tool, arguments)))
        end, result = _wait(future, started + self.server.timeout_s, stop)
        seconds = time.monotonic() - started
        if end == "ok" and isinstance(result, BaseException):
            if _closed(result):
                self._down(f"it stopped during the call ({_why(result)})")
                return CallOutcome("down", detail=self.reason, seconds=seconds)
            return CallOutcome("error", detail=_why(result), seconds=seconds)  # e.g. a JSON-RPC error
        return CallOutcome(end, result, seconds=seconds)

    def stop_task(self) -> None:
        """End the connection (the SDK stops a stdio server: stdin closed, then SIGTERM, SIGKILL, each
        wait bounded): a ready one is asked to close, one still starting is cancelled; either way this
        returns once the server is gone (or after _STOP_S, logged)."""
        task, closing, running = self._task, self._closing, self._running
        self._task = None
        if task is None or task.done():
            return
        if self.state == "ready" and closing is not None:
            self._loop.loop.call_soon_threadsafe(closing.set)
            ended: concurrent.futures.Future[Any] = task
        else:
            assert running is not None  # set before the task first awaits
            ended = self._loop.submit(_cancelled(running))
        try:
            ended.result(timeout=_STOP_S)
        except concurrent.futures.CancelledError:
            pass
        except Exception as exc:  # it failed: its reason is already kept
            log.info("MCP server %s: stopped (%s)", self.server.name, _why(exc))

    def close(self) -> None:
        self.stop_task()
        self.state = "stopped" if self.state == "ready" else self.state


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until its cleanup (the server's shutdown, shielded in the SDK) is done."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def _awaited(awaitable: Awaitable[T]) -> T | BaseException:
    """The result, or the exception as a value (so that a cancelled future means only: cancelled)."""
    try:
        return await awaitable
    except Exception as exc:
        return exc


async def _all_tools(session: Any) -> tuple[Any, ...]:
    """Every page of tools/list (at most 100 pages: a paginator that never ends cannot hang a start)."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _wait(
    future: concurrent.futures.Future[Any], deadline: float, stop: threading.Event | None
) -> tuple[CallEnd, Any]:
    """Wait for `future` until the deadline or the stop switch; cancelled (the server is told) if not."""
    try:
        while True:
            try:
                return "ok", future.result(timeout=_POLL_S)
            except concurrent.futures.TimeoutError:
                pass
            if stop is not None and stop.is_set():
                future.cancel()
                return "stopped", None
            if time.monotonic() >= deadline:
                future.cancel()
                return "timeout", None
    except BaseException:  # KeyboardInterrupt in `vibe run`: the server is told before it propagates
        future.cancel()
        raise


def _closed(exc: BaseException) -> bool:
    from mcp.types import CONNECTION_CLOSED

    from mcp import MCPError

    return (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED) or isinstance(
        exc, ConnectionError | EOFError
    )


def _why(exc: BaseException) -> str:
    """An exception in one line; an exception group (anyio's) by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    if isinstance(exc, AvibeError):  # ours already says what it is and what to do
        return text[:_LINE_CHARS]
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:_LINE_CHARS]
