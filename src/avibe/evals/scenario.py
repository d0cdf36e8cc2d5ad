"""Scenarios of the memory evaluation (SPEC E1): a scripted conversation plus its ground truth.

Values only, plus `load_scenario` / `scenario_from_dict` which validate strictly and name the bad field
(`events[3].tool_uses[0].output: expected a string`). The file format is documented in
docs/eval-format.md; JSON and YAML files are both accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, cast, get_args

import yaml

from avibe.evals.strict import Reader
from avibe.evals.strict import ScenarioError as ScenarioError  # re-exported: part of this module's API

FORMAT_VERSION: Final = 1
BackgroundKind = Literal["watch", "timer", "callback", "agent"]
ItemKind = Literal["constraint", "authorisation", "preference"]
ItemStatus = Literal["active", "revoked", "superseded"]
RefKind = Literal["job_id", "path", "command", "error"]
ProbeKind = Literal["exact", "rubric", "next_action"]
DEFAULT_START: Final = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call of an assistant turn and its output (output lives in the replay only, A3)."""

    id: str
    name: str
    arguments: dict[str, Any]
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class UserMessage:
    author: str
    text: str
    type: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    text: str
    tool_uses: tuple[ToolUse, ...] = ()
    type: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class BackgroundInput:
    """Input not typed by a person: a watch, timer, callback or another agent session (T1)."""

    source: BackgroundKind
    name: str
    ref: str
    text: str
    type: Literal["background"] = "background"


Event = UserMessage | AssistantTurn | BackgroundInput


@dataclass(frozen=True, slots=True)
class PlantedItem:
    """A constraint, authorisation or preference the user stated, in their exact words.

    anchor:   a distinctive phrase a paraphrase would keep (finds the sentence that restates it).
    loosened: known loosened variants (changed number, lost negation) to recognise verbatim.
    status:   active, or revoked/superseded by `replaced_by` (another item's id).
    """

    id: str
    kind: ItemKind
    text: str
    anchor: str
    loosened: tuple[str, ...] = ()
    status: ItemStatus = "active"
    replaced_by: str = ""


@dataclass(frozen=True, slots=True)
class Queue:
    """Items to handle in order; the first `done` are finished when the conversation ends."""

    items: tuple[str, ...]
    done: int

    @property
    def next_item(self) -> str | None:
        return self.items[self.done] if self.done < len(self.items) else None

    @property
    def remaining(self) -> tuple[str, ...]:
        return self.items[self.done :]


@dataclass(frozen=True, slots=True)
class Spoof:
    """Text that claims the user's authority without being the user's message.

    source:  the delivery path of the spoof (a background kind), or "user" for a person's message that
             starts with `[Harness:` (T2: it must never pass for a harness tag).
    payload: the distinctive request it carries; found in the user's words, it was misattributed.
    """

    source: BackgroundKind | Literal["user"]
    payload: str


@dataclass(frozen=True, slots=True)
class Reference:
    kind: RefKind
    value: str


@dataclass(frozen=True, slots=True)
class Probe:
    """A question asked of the model from the compacted context.

    exact:       `answer` must appear in the reply (normalised).
    rubric:      each of `rubric` is judged pass/fail by the judge model.
    next_action: any of `expect` must appear and none of `forbid` may appear in the reply.
    """

    id: str
    kind: ProbeKind
    question: str
    answer: str = ""
    rubric: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroundTruth:
    mission: str = ""  # the user's exact wording of the goal ("" for imported conversations)
    mission_key: str = ""  # distinctive phrase a faithful restatement keeps
    items: tuple[PlantedItem, ...] = ()
    queue: Queue | None = None
    spoofs: tuple[Spoof, ...] = ()
    references: tuple[Reference, ...] = ()
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    type: str  # one of generators.SCENARIO_TYPES, or "custom" / "imported"
    seed: int | None
    user: str
    events: tuple[Event, ...]
    truth: GroundTruth = field(default_factory=GroundTruth)
    start: datetime = DEFAULT_START
    description: str = ""


# --- strict reading -------------------------------------------------------------------------------


def _tool_use(data: object, path: str) -> ToolUse:
    r = Reader(data, path)
    arguments = r.raw("arguments", {})
    if not isinstance(arguments, dict):
        raise ScenarioError(f"{r.at('arguments')}: expected a mapping")
    use = ToolUse(
        r.nonempty("id"), r.nonempty("name"), dict(arguments), r.text("output"), r.flag("is_error", False)
    )
    r.done()
    return use


def _event(data: object, path: str) -> Event:
    r = Reader(data, path)
    kind = r.choice("type", ("user", "assistant", "background"))
    event: Event
    if kind == "user":
        event = UserMessage(author=r.nonempty("author"), text=r.nonempty("text"))
    elif kind == "assistant":
        uses = tuple(_tool_use(u, f"{r.at('tool_uses')}[{i}]") for i, u in enumerate(r.seq("tool_uses")))
        event = AssistantTurn(text=r.text("text", ""), tool_uses=uses)
        if not event.text and not uses:
            raise ScenarioError(f"{path}: an assistant turn needs text or tool_uses")
    else:
        source = cast(BackgroundKind, r.choice("source", get_args(BackgroundKind)))
        event = BackgroundInput(source, r.nonempty("name"), r.text("ref", ""), r.nonempty("text"))
    r.done()
    return event


def _item(data: object, path: str) -> PlantedItem:
    r = Reader(data, path)
    item = PlantedItem(
        id=r.nonempty("id"),
        kind=cast(ItemKind, r.choice("kind", get_args(ItemKind))),
        text=r.nonempty("text"),
        anchor=r.nonempty("anchor"),
        loosened=r.texts("loosened"),
        status=cast(ItemStatus, r.choice("status", get_args(ItemStatus), "active")),
        replaced_by=r.text("replaced_by", ""),
    )
    r.done()
    if item.anchor.casefold() not in item.text.casefold():
        raise ScenarioError(f"{path}.anchor: {item.anchor!r} does not occur in the item's text")
    if item.status != "active" and not item.replaced_by:
        raise ScenarioError(f"{path}.replaced_by: a {item.status} item must name the item that replaced it")
    return item


def _queue(data: object, path: str) -> Queue | None:
    if data is None:
        return None
    r = Reader(data, path)
    queue = Queue(items=r.texts("items"), done=r.integer("done"))
    r.done()
    if not queue.items or not 0 <= queue.done <= len(queue.items):
        raise ScenarioError(f"{path}.done: must be between 0 and the number of items ({len(queue.items)})")
    return queue


def _spoof(data: object, path: str) -> Spoof:
    r = Reader(data, path)
    source = r.choice("source", (*get_args(BackgroundKind), "user"))
    spoof = Spoof(cast(BackgroundKind | Literal["user"], source), r.nonempty("payload"))
    r.done()
    return spoof


def _reference(data: object, path: str) -> Reference:
    r = Reader(data, path)
    ref = Reference(cast(RefKind, r.choice("kind", get_args(RefKind))), r.nonempty("value"))
    r.done()
    return ref


def _probe(data: object, path: str) -> Probe:
    r = Reader(data, path)
    probe = Probe(
        id=r.nonempty("id"),
        kind=cast(ProbeKind, r.choice("kind", get_args(ProbeKind))),
        question=r.nonempty("question"),
        answer=r.text("answer", ""),
        rubric=r.texts("rubric"),
        expect=r.texts("expect"),
        forbid=r.texts("forbid"),
    )
    r.done()
    needs = {"exact": probe.answer, "rubric": probe.rubric, "next_action": probe.expect or probe.forbid}
    if not needs[probe.kind]:
        field_name = {"exact": "answer", "rubric": "rubric", "next_action": "expect"}[probe.kind]
        raise ScenarioError(f"{path}.{field_name}: a {probe.kind} probe needs it")
    return probe


def _truth(data: object, path: str) -> GroundTruth:
    r = Reader(data, path)

    def many(key: str, parse: Any) -> tuple[Any, ...]:
        return tuple(parse(v, f"{r.at(key)}[{i}]") for i, v in enumerate(r.seq(key)))

    truth = GroundTruth(
        mission=r.text("mission", ""),
        mission_key=r.text("mission_key", ""),
        items=many("items", _item),
        queue=_queue(r.raw("queue", None), r.at("queue")),
        spoofs=many("spoofs", _spoof),
        references=many("references", _reference),
        probes=many("probes", _probe),
    )
    r.done()
    return truth


def _check_grounded(scenario: Scenario) -> None:
    """Ground truth must be planted in the conversation, or the metrics would measure nothing."""
    user_texts = [e.text for e in scenario.events if isinstance(e, UserMessage)]
    everything = "\n".join(_event_texts(scenario.events))

    def said(text: str) -> bool:
        return any(text in t for t in user_texts)

    truth = scenario.truth
    if truth.mission and not said(truth.mission):
        raise ScenarioError("truth.mission: not found verbatim in any user message")
    if truth.mission_key and truth.mission_key.casefold() not in truth.mission.casefold():
        raise ScenarioError("truth.mission_key: does not occur in truth.mission")
    ids = {item.id for item in truth.items}
    for i, item in enumerate(truth.items):
        if not said(item.text):
            raise ScenarioError(f"truth.items[{i}].text: not found verbatim in any user message")
        if item.replaced_by and item.replaced_by not in ids:
            raise ScenarioError(f"truth.items[{i}].replaced_by: no item has id {item.replaced_by!r}")
    for i, spoof in enumerate(truth.spoofs):
        if spoof.payload not in everything:
            raise ScenarioError(f"truth.spoofs[{i}].payload: not found in the conversation")
    for i, ref in enumerate(truth.references):
        if ref.value not in everything:
            raise ScenarioError(f"truth.references[{i}].value: not found in the conversation")


def _event_texts(events: Sequence[Event]) -> list[str]:
    texts: list[str] = []
    for event in events:
        texts.append(event.text)
        if isinstance(event, AssistantTurn):
            for use in event.tool_uses:
                texts.extend([json.dumps(use.arguments, ensure_ascii=False), use.output])
    return texts


def scenario_from_dict(data: object) -> Scenario:
    """Build a Scenario from parsed JSON/YAML; raise ScenarioError naming the first bad field."""
    r = Reader(data, "")
    version = r.integer("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise ScenarioError(f"format: version {version} is not supported (this Avibe reads {FORMAT_VERSION})")
    seed = r.raw("seed", None)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ScenarioError("seed: expected an integer or null")
    start_text = r.text("start", DEFAULT_START.isoformat())
    try:
        start = datetime.fromisoformat(start_text)
    except ValueError as err:
        raise ScenarioError(f"start: {start_text!r} is not an ISO 8601 time") from err
    events = tuple(_event(e, f"events[{i}]") for i, e in enumerate(r.seq("events")))
    if not events:
        raise ScenarioError("events: a scenario needs at least one event")
    scenario = Scenario(
        id=r.nonempty("id"),
        type=r.nonempty("type"),
        seed=seed,
        user=r.nonempty("user"),
        events=events,
        truth=_truth(r.raw("truth", {}), "truth"),
        start=start if start.tzinfo else start.replace(tzinfo=UTC),
        description=r.text("description", ""),
    )
    r.done()
    _check_grounded(scenario)
    return scenario


def load_scenario(path: Path | str) -> Scenario:
    """Read a scenario file (.json, .yaml or .yml) and validate it strictly."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read the scenario file ({err.strerror})") from err
    try:
        data = yaml.safe_load(text) if path.suffix in {".yaml", ".yml"} else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ScenarioError(
            f"{path}: not valid {'YAML' if path.suffix != '.json' else 'JSON'}: {err}"
        ) from err
    try:
        return scenario_from_dict(data)
    except ScenarioError as err:
        raise ScenarioError(f"{path}: {err}") from err


# --- writing --------------------------------------------------------------------------------------


def _drop_defaults(data: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in defaults or defaults[k] != v}


def _event_dict(event: Event) -> dict[str, Any]:
    if isinstance(event, UserMessage):
        return {"type": "user", "author": event.author, "text": event.text}
    if isinstance(event, BackgroundInput):
        return {
            "type": "background",
            "source": event.source,
            "name": event.name,
            "ref": event.ref,
            "text": event.text,
        }
    uses = [
        _drop_defaults(
            {
                "id": u.id,
                "name": u.name,
                "arguments": u.arguments,
                "output": u.output,
                "is_error": u.is_error,
            },
            {"is_error": False},
        )
        for u in event.tool_uses
    ]
    return _drop_defaults({"type": "assistant", "text": event.text, "tool_uses": uses}, {"tool_uses": []})


def _truth_dict(truth: GroundTruth) -> dict[str, Any]:
    item_defaults = {"loosened": [], "status": "active", "replaced_by": ""}
    probe_defaults = {"answer": "", "rubric": [], "expect": [], "forbid": []}
    items = [
        _drop_defaults(
            {
                "id": i.id,
                "kind": i.kind,
                "text": i.text,
                "anchor": i.anchor,
                "loosened": list(i.loosened),
                "status": i.status,
                "replaced_by": i.replaced_by,
            },
            item_defaults,
        )
        for i in truth.items
    ]
    probes = [
        _drop_defaults(
            {
                "id": p.id,
                "kind": p.kind,
                "question": p.question,
                "answer": p.answer,
                "rubric": list(p.rubric),
                "expect": list(p.expect),
                "forbid": list(p.forbid),
            },
            probe_defaults,
        )
        for p in truth.probes
    ]
    data: dict[str, Any] = {
        "mission": truth.mission,
        "mission_key": truth.mission_key,
        "items": items,
        "queue": {"items": list(truth.queue.items), "done": truth.queue.done} if truth.queue else None,
        "spoofs": [{"source": s.source, "payload": s.payload} for s in truth.spoofs],
        "references": [{"kind": r.kind, "value": r.value} for r in truth.references],
        "probes": probes,
    }
    return _drop_defaults(
        data,
        {
            "mission": "",
            "mission_key": "",
            "items": [],
            "queue": None,
            "spoofs": [],
            "references": [],
            "probes": [],
        },
    )


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The file form of a scenario; `scenario_from_dict(scenario_to_dict(s)) == s`."""
    return {
        "format": FORMAT_VERSION,
        "id": scenario.id,
        "type": scenario.type,
        "seed": scenario.seed,
        "user": scenario.user,
        "start": scenario.start.isoformat(),
        "description": scenario.description,
        "events": [_event_dict(e) for e in scenario.events],
        "truth": _truth_dict(scenario.truth),
    }


def save_scenario(scenario: Scenario, path: Path | str) -> Path:
    """Write a scenario as JSON (or YAML when the name ends in .yaml/.yml)."""
    path = Path(path)
    data = scenario_to_dict(scenario)
    if path.suffix in {".yaml", ".yml"}:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
    else:
        text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
