"""The chat attached to a session another process hosts (avibe.tui.driver, docs/chat.md): it shows that
host's real state - working while the host records a turn, idle after - and its Ctrl-C puts the stop
note into the record, for the host to stop its step (avibe.host.turn_watch); the note is one short line
on the screen. A chat whose terminal went away quits and leaves the host's step running. A real SQLite
record; the host's side is what `vibe serve` records."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from avibe.cli.attach import ask_host_to_stop, host_in_turn
from avibe.compose import SystemClock
from avibe.host.session import STOPPED_BY_PERSON
from avibe.ingress import deliver
from avibe.record.entries import EntryQuery, Source
from avibe.record.state import HostActivity
from avibe.store import open_store
from avibe.tui.driver import Attached, ChatDriver, Target
from avibe.tui.updates import Busy, Cancelled, Update


def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        done.wait(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_attached_chat_shows_the_hosts_turn_and_its_ctrl_c_asks_the_host_to_stop(tmp_path: Path) -> None:
    clock = SystemClock()
    with open_store(f"sqlite:///{tmp_path / 'avibe.db'}") as store:
        session = store.create_session(title=str(tmp_path)).id
        deliver(store, session, Source("user", name="ana"), "Run the long job.", clock=clock)  # elsewhere
        attached = Attached(
            store, session, "kofi", "vibey", "pid 1 on box",
            post=lambda text: deliver(store, session, Source("user", name="kofi"), text, clock=clock),
            hosted=lambda: True,
            in_turn=lambda: host_in_turn(store, session),
            stop=lambda: ask_host_to_stop(store, session, clock),
        )  # fmt: skip

        @contextmanager
        def opener(*args: Any, **kwargs: Any) -> Iterator[Attached]:
            yield attached

        seen: list[Update] = []
        driver = ChatDriver(opener, seen.append, Target(session, "m"), poll_s=0.02)
        driver.start()
        try:
            _until(lambda: seen and not driver.busy, "the chat to attach")
            driver.cancel()  # idle: nothing to stop, nothing recorded
            store.save_state(
                session, HostActivity.KEY, HostActivity(turn=True, doing="shell sleep 60").to_dict()
            )
            _until(lambda: Busy(True) in seen and driver.busy, "working while the host runs its turn")
            driver.cancel(host=False)  # the chat's terminal went away: the host's step is left to it
            assert STOPPED_BY_PERSON not in [e.source for e in store.query(EntryQuery(session))]
            driver.cancel()  # Ctrl-C
            entries = store.query(EntryQuery(session))
            assert [e.source for e in entries].count(STOPPED_BY_PERSON) == 1
            _until(lambda: any(isinstance(u, Cancelled) for u in seen), "the stop's one short line")
            store.save_state(session, HostActivity.KEY, HostActivity().to_dict())  # the host stopped
            _until(lambda: seen[-1] == Busy(False) and not driver.busy, "idle once the host is")
        finally:
            driver.stop()
