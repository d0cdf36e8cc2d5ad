"""Delegated runs (the seed's scene waits on "delegated runs"): a task handed to a new session
whose final reply comes back to the delegating session as an `agent` input whose ref is the delegated
session (T1).

`Delegations.start(task)` creates the child session, posts the task into it (an `agent` input from the
parent), asks the edge to get it run (`start`: a process of its own under `vibe run`, nothing under
`vibe serve`, whose hosts pick up any session with waiting input) and remembers it in the parent's
state. As the parent host's `InputSource`, `poll` looks at each child still out: when the child's
newest entry is a reply with no tool calls (its turn ended with an answer), that reply is delivered to
the parent under the key `delegate:<child>:<seq>` - exactly once, whichever host polls. Until then the
child is in `waiting_for` (it holds `vibe run` open, like a background job) and in the scene's Waiting
for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from avibe.ports import KeyedDelivery, RecordStore
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.state import DelegatedRun, DelegationsState

log = logging.getLogger(__name__)

STATE_KEY: Final = DelegationsState.KEY
TASK_SHOWN: Final = 80
PostTo = Callable[[str, Source, str], Entry]  # (session, source, text): ingress into another session


class Delegations:
    def __init__(
        self,
        store: RecordStore,
        session_id: str,
        deliver: KeyedDelivery,
        *,
        post_to: PostTo,
        start: Callable[[str], None],
        agent: str = "vibey",
        assign: Callable[[str, str], None] = lambda child, worker: None,
    ) -> None:
        self._store, self._session, self._deliver = store, session_id, deliver
        self._post_to, self._start, self._agent, self._assign = post_to, start, agent, assign
        saved = DelegationsState.from_stored(store.load_state(session_id, STATE_KEY))
        self._runs: list[DelegatedRun] = list(saved.runs)

    def start(self, task: str, worker: str = "vibey") -> str:
        """A new session working on `task` with `worker` in it (Vibey, or an external agent the edge
        has checked: `assign` records it for whichever host runs the session); returns its id."""
        title = f"delegated by {self._session}: {' '.join(task.split())[:TASK_SHOWN]}"
        child = self._store.create_session(title=title).id
        if worker != "vibey":
            self._assign(child, worker)  # before the task is posted: no host may run it with Vibey
        entry = self._post_to(child, Source("agent", name=self._agent, ref=self._session), task)
        shown = task[:TASK_SHOWN]
        self._runs.append(DelegatedRun(child, shown, entry.seq, worker=worker))
        self._save()
        self._start(child)
        return child

    def poll(self) -> None:
        changed = False
        for index, run in enumerate(self._runs):
            if run.reported:
                continue
            final = self._final_reply(run.child, run.from_seq)
            if final is None:
                continue
            source = Source("agent", name=self._agent, ref=run.child)
            text = f"The delegated run in session {run.child} finished. Its final reply:\n\n{final.text}"
            self._deliver(source, text, f"delegate:{run.child}:{final.seq}")
            self._runs[index] = replace(run, reported=True)
            changed = True
        if changed:
            self._save()

    def _final_reply(self, child: str, from_seq: int) -> Entry | None:
        count = self._store.get_session(child).entry_count
        if count <= from_seq:
            return None
        newest = self._store.query(EntryQuery(child, seq_from=count))
        if not newest:
            return None
        last = newest[-1]
        return last if last.kind == "assistant" and not last.calls and last.text.strip() else None

    def waiting_for(self) -> tuple[str, ...]:
        return tuple(run.child for run in self._runs if not run.reported)

    def scene_lines(self) -> tuple[tuple[str, str, str, str, str], ...]:
        """(session id, what, "", "", kind) of each delegated run still out, for the scene's Waiting for
        (S3)."""
        return tuple(
            (run.child, f"delegated run{_by(run)}: {run.task}", "", "", "delegated run")
            for run in self._runs
            if not run.reported
        )

    def close(self) -> None:
        """Nothing to stop: a delegated session lives on its own; a restart picks its report up."""

    def _save(self) -> None:
        self._store.save_state(self._session, STATE_KEY, DelegationsState(tuple(self._runs)).to_dict())


def _by(run: DelegatedRun) -> str:
    return "" if run.worker == "vibey" else f" ({run.worker})"
