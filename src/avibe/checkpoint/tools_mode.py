"""The checkpoint turn in tools mode: the model edits the two work files with tools, then answers with the
scene block (F2, F3); at most MAX_TOOL_ROUNDS rounds of tool calls, then one repair (V4).

API (used by turn.py):
    CHECKPOINT_TOOLS: tuple[ToolSpec, ...]     read_file, edit_file, done
    MAX_TOOL_ROUNDS = 5
    request_text(inputs, mind, checklist) -> str      the request, without its tag line
    tools_turn(st) -> Generator[Effect, EffectResult, TurnOutcome]
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Final

from avibe.checkpoint.effects import (
    Effect,
    EffectResult,
    ModelFailure,
    ReadFailed,
    ReadFile,
    TurnInputs,
    TurnOutcome,
    WriteWorkFiles,
)
from avibe.checkpoint.memo import read_ticks, render_checklist
from avibe.checkpoint.mind import apply_edit
from avibe.checkpoint.model import Checkpoint, Problem
from avibe.checkpoint.plan import cut_tool_output
from avibe.checkpoint.scene import CLOSE_TAG, OPEN_TAG, SCENE_MIN_CHARS, SCENE_TEMPLATE, scene_blocks
from avibe.checkpoint.turn_state import (
    TurnState,
    accept,
    call,
    draft,
    fail,
    harness_message,
    model_failed,
    moving,
    repair_text,
)
from avibe.prompts import render
from avibe.record.messages import ChatMessage, ModelReply, ToolCall, ToolSpec

MAX_TOOL_ROUNDS: Final = 5
READ_CAP_SHARE: Final = 10  # a file read in the turn gets at most window // 10 tokens ...
READ_CAP_FLOOR: Final = 200  # ... but never less than this

CHECKPOINT_TOOLS: Final[tuple[ToolSpec, ...]] = (
    ToolSpec(
        "read_file",
        "Read any file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        "edit_file",
        "Replace the exact text `old` by `new` in the mind file or the memo checklist (the only files you "
        "may change).",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    ),
    ToolSpec("done", "Call when the two files are edited; then answer with the scene block."),
)


def request_text(inputs: TurnInputs, mind: str, checklist: str) -> str:
    """The tools-mode checkpoint request, without its tag line (added by `harness_message`)."""
    caps = ", ".join(f"{name} {cap}" for name, cap in inputs.budgets.mind_caps.items())
    return render(
        "checkpoint_request",
        notice=render("harness_notice").strip(),
        moving=moving(inputs),
        mind_path=inputs.mind_path,
        checklist_path=inputs.checklist_path,
        caps=caps,
        min_chars=SCENE_MIN_CHARS,
        scene_template=SCENE_TEMPLATE.strip(),
        rounds=MAX_TOOL_ROUNDS,
        mind=mind.strip(),
        checklist=checklist.strip() or "(no user messages leave the context this time)",
    )


def _scene_of(text: str) -> str:
    """The one scene block as stored (outer chatter dropped); the raw text when it is not exactly one."""
    blocks = scene_blocks(text)
    return f"{OPEN_TAG}{blocks[0]}{CLOSE_TAG}\n" if len(blocks) == 1 else text


# ---- the three tools --------------------------------------------------------------------------------


def _same_file(path: str, target: str) -> bool:
    """The model may name a work file by its full path or by its name ("mind.md")."""
    path = path.strip().removeprefix("./")
    return path == target or (bool(path) and "/" not in path and target.endswith("/" + path))


def _str_args(tool_call: ToolCall, names: Sequence[str]) -> list[str] | str:
    values = [tool_call.arguments.get(name) for name in names]
    if all(isinstance(v, str) for v in values):
        return [v for v in values if isinstance(v, str)]
    wanted = ", ".join(f"'{n}'" for n in names)
    return f"Refused: {tool_call.name} needs the string arguments {wanted}."


def _read(st: TurnState, tool_call: ToolCall) -> Generator[Effect, EffectResult, str]:
    args = _str_args(tool_call, ["path"])
    if isinstance(args, str):
        return args
    (path,) = args
    if _same_file(path, st.inputs.mind_path):
        return st.mind
    if _same_file(path, st.inputs.checklist_path):
        return st.checklist
    result = yield ReadFile(path)
    if isinstance(result, ReadFailed):
        return f"Could not read {path}: {result.message}"
    if not isinstance(result, str):
        raise TypeError(f"ReadFile needs a str or ReadFailed back, got {type(result).__name__}")
    return _capped(st.inputs, tool_call, result)


def _capped(inputs: TurnInputs, tool_call: ToolCall, text: str) -> str:
    """A file read in the turn is cut to a tenth of the window (V9), so one read cannot overflow it."""
    cap = max(READ_CAP_FLOOR, inputs.budgets.window // READ_CAP_SHARE)
    message = ChatMessage(role="tool", content=text, tool_call_id=tool_call.id, name=tool_call.name)
    return cut_tool_output(message, inputs.counter, cap).content


def _edit_checklist(st: TurnState, old: str, new: str) -> str | None:
    """Apply a checklist edit when it changes nothing but checkboxes (N4); the refusal text otherwise."""
    count = st.checklist.count(old) if old else 0
    if count != 1:
        where = "is not in" if count == 0 else f"appears {count} times in"
        return f"Refused: the 'old' text {where} the memo checklist. Copy one exact line from it."
    edited = st.checklist.replace(old, new, 1)
    ticks = read_ticks(render_checklist(st.candidates), edited)
    if ticks.problems:
        reasons = " ".join(p.message for p in ticks.problems)
        return f"Refused: only the checkboxes may change ([x] keep, [ ] let go). {reasons}"
    st.checklist = edited
    return None


def _edit(st: TurnState, tool_call: ToolCall) -> Generator[Effect, EffectResult, str]:
    args = _str_args(tool_call, ["path", "old", "new"])
    if isinstance(args, str):
        return args
    path, old, new = args
    if _same_file(path, st.inputs.mind_path):
        outcome = apply_edit(st.mind, old, new)
        if not outcome.applied:
            return outcome.message
        st.mind = outcome.document
    elif _same_file(path, st.inputs.checklist_path):
        refusal = _edit_checklist(st, old, new)
        if refusal is not None:
            return refusal
    else:
        return (
            f"Refused: during a checkpoint you may change only {st.inputs.mind_path} and "
            f"{st.inputs.checklist_path}, and only with edit_file. {path} was not changed."
        )
    yield WriteWorkFiles(st.mind, st.checklist)
    return "Edit applied."


def _run_tool(st: TurnState, tool_call: ToolCall) -> Generator[Effect, EffectResult, str]:
    if tool_call.name == "read_file":
        return (yield from _read(st, tool_call))
    if tool_call.name == "edit_file":
        return (yield from _edit(st, tool_call))
    if tool_call.name == "done":
        return "Noted. Now answer with the scene block only."
    return (
        f"Refused: there is no tool '{tool_call.name}' in a checkpoint. Use read_file, edit_file and done; "
        "the two files can be changed only with edit_file - no writes, no overwrites, no other files."
    )


# ---- the turn ---------------------------------------------------------------------------------------


def _tool_message(tool_call: ToolCall, output: str) -> ChatMessage:
    return ChatMessage(role="tool", content=output, tool_call_id=tool_call.id, name=tool_call.name)


def _offers_scene(reply: ModelReply, current: str) -> bool:
    """A reply replaces the scene when it holds (or opens) a scene block, or when it is a final answer
    and the scene so far has no block. A repair reply that only says "fixed" keeps a good earlier scene."""
    if scene_blocks(reply.text) or OPEN_TAG in reply.text.lower():
        return True
    return not reply.tool_calls and not scene_blocks(current)


def _tool_loop(st: TurnState) -> Generator[Effect, EffectResult, ModelFailure | None]:
    """Model calls until a reply without tool calls, or past MAX_TOOL_ROUNDS rounds of tool calls."""
    while True:
        reply = yield from call(st, CHECKPOINT_TOOLS, None)
        if isinstance(reply, ModelFailure):
            return reply
        st.messages.append(ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls))
        if _offers_scene(reply, st.scene):
            st.scene = reply.text
        if not reply.tool_calls:
            return None
        if st.rounds >= MAX_TOOL_ROUNDS:
            st.notes.append(f"the model asked for a tool round past the limit of {MAX_TOOL_ROUNDS}")
            for tool_call in reply.tool_calls:  # every call still gets its answer, so the history stays valid
                st.messages.append(_tool_message(tool_call, "Not run: the rounds of tool calls are used up."))
            return None
        st.rounds += 1
        for tool_call in reply.tool_calls:
            st.messages.append(_tool_message(tool_call, (yield from _run_tool(st, tool_call))))


def _tools_draft(st: TurnState) -> tuple[Checkpoint, list[Problem]]:
    ticks = read_ticks(render_checklist(st.candidates), st.checklist)
    proposed, problems = draft(st, ticks.ticked, _scene_of(st.scene))
    return proposed, [*ticks.problems, *problems]


def tools_turn(st: TurnState) -> Generator[Effect, EffectResult, TurnOutcome]:
    """Request, tool loop, draft; when it has problems, one repair request and a second tool loop."""
    yield WriteWorkFiles(st.mind, st.checklist)
    st.messages.append(harness_message(st.inputs, request_text(st.inputs, st.mind, st.checklist)))
    failure = yield from _tool_loop(st)
    if failure is not None:
        return model_failed(st, failure)
    proposed, first = _tools_draft(st)
    if not first:
        return accept(st, proposed, (), repaired=False)
    how = render("repair_how_tools").strip()
    st.messages.append(harness_message(st.inputs, repair_text(first, how)))
    failure = yield from _tool_loop(st)
    if failure is not None:
        return model_failed(st, failure, first)
    proposed, problems = _tools_draft(st)
    return accept(st, proposed, first, repaired=True) if not problems else fail(st, problems, first)
