"""Reading a scenario file strictly (SPEC E1, docs/eval-format.md): pydantic models of the file form
(evals/strict.py) that name every bad field (`events[3].tool_uses[0].output: expected a string`), then
a check that the ground truth is planted in the conversation. JSON and YAML files are both accepted."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, field_validator, model_validator

from avibe.evals.scenario.values import (
    DEFAULT_START,
    FORMAT_VERSION,
    AssistantTurn,
    BackgroundInput,
    BackgroundKind,
    Event,
    GroundTruth,
    ItemKind,
    ItemStatus,
    PlantedItem,
    Probe,
    ProbeKind,
    Queue,
    Reference,
    RefKind,
    Scenario,
    Spoof,
    ToolUse,
    UserMessage,
    UserTag,
)
from avibe.evals.strict import FieldProblem, FileModel, NonEmpty, ScenarioError, read


class _ToolUseFile(FileModel):
    id: NonEmpty
    name: NonEmpty
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str
    is_error: bool = False

    def value(self) -> ToolUse:
        return ToolUse(self.id, self.name, dict(self.arguments), self.output, self.is_error)


class _UserFile(FileModel):
    type: Literal["user"]
    author: NonEmpty
    text: NonEmpty
    tag: UserTag = ""

    def value(self) -> UserMessage:
        return UserMessage(self.author, self.text, self.tag)


class _AssistantFile(FileModel):
    type: Literal["assistant"]
    text: str = ""
    tool_uses: list[_ToolUseFile] = Field(default_factory=list)

    @model_validator(mode="after")
    def _says_something(self) -> _AssistantFile:
        if not self.text and not self.tool_uses:
            raise ValueError("an assistant turn needs text or tool_uses")
        return self

    def value(self) -> AssistantTurn:
        return AssistantTurn(self.text, tuple(use.value() for use in self.tool_uses))


class _BackgroundFile(FileModel):
    type: Literal["background"]
    source: BackgroundKind
    name: NonEmpty
    ref: str = ""
    text: NonEmpty

    def value(self) -> BackgroundInput:
        return BackgroundInput(self.source, self.name, self.ref, self.text)


class _ItemFile(FileModel):
    id: NonEmpty
    kind: ItemKind
    text: NonEmpty
    anchor: NonEmpty
    loosened: list[str] = Field(default_factory=list)
    status: ItemStatus = "active"
    replaced_by: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> _ItemFile:
        if self.anchor.casefold() not in self.text.casefold():
            raise FieldProblem("anchor", f"{self.anchor!r} does not occur in the item's text")
        if self.status != "active" and not self.replaced_by:
            raise FieldProblem("replaced_by", f"a {self.status} item must name the item that replaced it")
        return self

    def value(self) -> PlantedItem:
        return PlantedItem(
            self.id, self.kind, self.text, self.anchor, tuple(self.loosened), self.status, self.replaced_by
        )


class _QueueFile(FileModel):
    items: list[str] = Field(default_factory=list)
    done: int

    @model_validator(mode="after")
    def _in_range(self) -> _QueueFile:
        if not self.items or not 0 <= self.done <= len(self.items):
            raise FieldProblem("done", f"must be between 0 and the number of items ({len(self.items)})")
        return self

    def value(self) -> Queue:
        return Queue(tuple(self.items), self.done)


class _SpoofFile(FileModel):
    source: Literal["watch", "timer", "callback", "agent", "user"]
    payload: NonEmpty


class _ReferenceFile(FileModel):
    kind: RefKind
    value: NonEmpty


class _ProbeFile(FileModel):
    id: NonEmpty
    kind: ProbeKind
    question: NonEmpty
    answer: str = ""
    rubric: list[str] = Field(default_factory=list)
    expect: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _answerable(self) -> _ProbeFile:
        needs = {"exact": self.answer, "rubric": self.rubric, "next_action": self.expect or self.forbid}
        if not needs[self.kind]:
            field_name = {"exact": "answer", "rubric": "rubric", "next_action": "expect"}[self.kind]
            raise FieldProblem(field_name, f"a {self.kind} probe needs it")
        return self

    def value(self) -> Probe:
        return Probe(
            self.id,
            self.kind,
            self.question,
            self.answer,
            tuple(self.rubric),
            tuple(self.expect),
            tuple(self.forbid),
        )


class _TruthFile(FileModel):
    mission: str = ""
    mission_key: str = ""
    items: list[_ItemFile] = Field(default_factory=list)
    queue: _QueueFile | None = None
    spoofs: list[_SpoofFile] = Field(default_factory=list)
    references: list[_ReferenceFile] = Field(default_factory=list)
    probes: list[_ProbeFile] = Field(default_factory=list)

    def value(self) -> GroundTruth:
        return GroundTruth(
            mission=self.mission,
            mission_key=self.mission_key,
            items=tuple(item.value() for item in self.items),
            queue=self.queue.value() if self.queue else None,
            spoofs=tuple(Spoof(s.source, s.payload) for s in self.spoofs),
            references=tuple(Reference(r.kind, r.value) for r in self.references),
            probes=tuple(probe.value() for probe in self.probes),
        )


def _iso_time(value: object) -> datetime:
    """An ISO 8601 string (or a time YAML already read as one); a time without a zone is UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as err:
            raise ValueError(f"{value!r} is not an ISO 8601 time") from err
    if not isinstance(value, datetime):
        raise ValueError(f"expected an ISO 8601 time as a string, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class _ScenarioFile(FileModel):
    format: int = FORMAT_VERSION
    id: NonEmpty
    type: NonEmpty
    seed: int | None = None
    user: NonEmpty
    start: Annotated[datetime, BeforeValidator(_iso_time)] = DEFAULT_START
    description: str = ""
    events: list[Annotated[_UserFile | _AssistantFile | _BackgroundFile, Field(discriminator="type")]] = (
        Field(default_factory=list, validate_default=True)
    )
    truth: _TruthFile = Field(default_factory=_TruthFile)

    @field_validator("format")
    @classmethod
    def _supported(cls, version: int) -> int:
        if version != FORMAT_VERSION:
            raise ValueError(f"version {version} is not supported (this Avibe reads {FORMAT_VERSION})")
        return version

    @field_validator("events")
    @classmethod
    def _not_empty(cls, events: list[Any]) -> list[Any]:
        if not events:
            raise ValueError("a scenario needs at least one event")
        return events

    def value(self) -> Scenario:
        return Scenario(
            id=self.id,
            type=self.type,
            seed=self.seed,
            user=self.user,
            events=tuple(event.value() for event in self.events),
            truth=self.truth.value(),
            start=self.start,
            description=self.description,
        )


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
    """Build a Scenario from parsed JSON/YAML; raise ScenarioError naming every bad field, one per line
    (then, once the file is well formed, the first piece of ground truth the conversation lacks)."""
    scenario = read(_ScenarioFile, data, tagged={"events"}).value()
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
    except ScenarioError as err:  # every line names the file, as a compiler's messages do
        raise ScenarioError("\n".join(f"{path}: {line}" for line in str(err).splitlines())) from err
