"""The tool-execution hook (`ContextControls.add_tool_hook`): what the edges subscribe to instead of
swapping Vibey's tool runner. Each hook sits around every tool call the loop runs - real tools over a real
record - sees the result before the model does, and may answer a call without running it."""

from __future__ import annotations

from typing import Any

from vibey_doubles import tool_step

from avibe.host.agent import ContextControls, ToolRunner, hooked
from avibe.ports import ToolResult
from avibe.providers.scripted import reply
from avibe.record.messages import ToolCall


def test_hooks_wrap_every_call_the_first_added_outermost() -> None:
    order: list[str] = []

    def hook(name: str) -> Any:
        def around(call: ToolCall, run: ToolRunner) -> ToolResult:
            order.append(f"{name} in")
            result = run(call)
            order.append(f"{name} out")
            return result

        return around

    def tool(call: ToolCall) -> ToolResult:
        order.append("tool")
        return ToolResult(call.name)

    run = hooked(tool, [hook("a"), hook("b")])
    assert run(ToolCall("c1", "ls", {})).output == "ls"
    assert order == ["a in", "b in", "tool", "b out", "a out"]
    assert hooked(tool, [])(ToolCall("c2", "x", {})).output == "x"


def test_a_hook_sees_each_loop_call_and_its_result(make_harness: Any) -> None:
    h = make_harness([tool_step("read_file", path="notes.txt"), reply("It says: ship Friday.")])
    (h.workdir / "notes.txt").write_text("ship Friday\n")
    seen: list[tuple[str, str]] = []

    def watch(call: ToolCall, run: ToolRunner) -> ToolResult:
        result = run(call)
        seen.append((call.name, result.output))
        return result

    controls: ContextControls = h.vibey  # what the edges get (`HostedSession.context`)
    controls.add_tool_hook(watch)
    assert h.send("What do the notes say?").reply == "It says: ship Friday."
    assert [name for name, _ in seen] == ["read_file"] and "ship Friday" in seen[0][1]
    assert controls.meter().tokens > 0 and controls.meter().compaction == "checkpoint"


def test_a_hook_may_answer_without_running_the_tool(make_harness: Any) -> None:
    h = make_harness([tool_step("write_file", path="out.txt", content="x"), reply("Not written.")])

    def refuse(call: ToolCall, run: ToolRunner) -> ToolResult:
        return ToolResult("[not started]", is_error=True)

    h.vibey.add_tool_hook(refuse)
    h.send("Write out.txt")
    assert not (h.workdir / "out.txt").exists()
    told = [m.content for m in h.vibey.load_state().messages if m.role == "tool"]
    assert any("[not started]" in text for text in told)
