"""Scenario types about the work itself: the mission, the queue, what we wait for, a failed approach,
a number the user corrects (P1, P2, S1, S3, M4, M5)."""

from __future__ import annotations

from avibe.evals.generators.builder import SERVICES, SYSTEMS, Builder, open_with_mission
from avibe.evals.scenario import (
    GroundTruth,
    PlantedItem,
    Probe,
    Queue,
    Reference,
    Scenario,
)
from avibe.tools.shell import started_text


def mission_fade(seed: int, size: int) -> Scenario:
    """P1, M4: the goal is stated once, then many unrelated subtasks follow."""
    b = Builder("mission_fade", seed, size)
    target = b.rng.choice(SYSTEMS)
    mission, key = open_with_mission(
        b,
        f"move every {b.project.name} billing export off the old cron jobs and onto the {target} event bus, "
        "without losing a single invoice",
        f"{target} event bus",
    )
    b.reply("Understood. I'll keep that goal in view while handling the subtasks.")
    segments = b.share(6)
    for i, turns in enumerate(segments):
        b.say(f"Subtask {i + 1}: tidy up {b.filler._func()} in {b.filler._path()} and keep the tests green.")
        b.work(turns)
    probes = (
        Probe(
            "goal",
            "rubric",
            "In one sentence: what is the final goal of this session?",
            rubric=(
                f"names the {target} event bus as where the billing exports go",
                "says that no invoice may be lost",
            ),
        ),
        Probe(
            "after-subtasks",
            "next_action",
            "All subtasks so far are done. What do you work on next?",
            expect=(target,),
        ),
    )
    truth = GroundTruth(mission=mission, mission_key=key, probes=probes)
    return b.scenario(truth, "mission fade: the goal is stated once, then many unrelated subtasks")


def queue(seed: int, size: int) -> Scenario:
    """P2, M5, S1: a queue handled oldest first; the conversation ends right after an item closes."""
    b = Builder("queue", seed, size)
    first = b.rng.randint(2000, 8000)
    items = tuple(f"#{first + sum(b.rng.randint(1, 9) for _ in range(i + 1))}" for i in range(6))
    done = b.rng.randint(2, 4)
    agreement = "Ask me only when a decision is needed; otherwise review, fix CI and merge."
    mission = b.say(
        f"Please go through the open {b.project.name} pull requests oldest first: "
        f"{', '.join(items)}. {agreement}"
    )
    b.reply(f"Starting with {items[0]}.")
    segments = b.share(done + 1)
    for i in range(done):
        b.reply(f"Reviewing pull request {items[i]}.")
        b.work(segments[i])
        b.reply(f"Pull request {items[i]} is merged; CI was green.")
    b.work(segments[done])  # routine work after the last close, so compaction falls right after it
    nxt = items[done]
    truth = GroundTruth(
        mission=mission,
        mission_key="oldest first",
        items=(
            PlantedItem(
                "ask-only",
                "constraint",
                agreement,
                "only when a decision is needed",
                loosened=("ask me when a decision is needed",),
            ),
        ),
        queue=Queue(items, done),
        probes=(
            Probe("next", "exact", "Which pull request do you handle next? Give its number.", answer=nxt),
            Probe("carry-on", "next_action", "Carry on with the queue.", expect=(nxt,)),
        ),
    )
    return b.scenario(truth, "queue: pull requests oldest first; compaction right after an item closes")


def waiting_on(seed: int, size: int) -> Scenario:
    """S3, S6: background jobs, paths and commands that must survive exactly."""
    b = Builder("waiting_on", seed, size)
    shard = b.rng.randint(3, 64)
    job1, job2 = (f"job-{b.rng.randint(0x100000, 0xFFFFFF):06x}" for _ in range(2))
    cmd1 = f"./scripts/reindex.sh --shard {shard} --background"
    month = f"2026-{b.rng.randint(1, 10):02d}"
    cmd2 = f"./scripts/export_ledger.py --month {month} --out-dir /srv/{b.project.package}/exports"
    out_path = f"/srv/{b.project.package}/exports/ledger-{b.rng.randint(1000, 9999)}.parquet"
    log2 = f"/var/log/{b.project.package}/{job2}.log"
    mission = b.say(
        f"Our goal for this whole session: rebuild the {b.project.name} search index and export the "
        "monthly ledger. I'll hand you smaller tasks along the way."
    )
    segments = b.share(3)
    b.reply(
        "Starting the reindex in the background.",
        b.tool("shell", {"command": cmd1, "background": True}, started_text(job1, cmd1)),
    )
    b.work(segments[0])
    b.reply(
        "Starting the ledger export in the background.",
        b.tool("shell", {"command": cmd2, "background": True}, started_text(job2, cmd2)),
        b.tool("shell", {"command": f"tail -n 1 {log2}"}, f"exit code: 0\nwriting {out_path}"),
    )
    b.work(segments[1])
    b.background("callback", "jobs", job1, f"Job {job1} finished: exit 0 after 41m12s.")
    b.reply(f"The reindex ({job1}) is done; still waiting on the export {job2}.")
    b.work(segments[2])
    refs = (
        Reference("job_id", job1),
        Reference("job_id", job2),
        Reference("command", cmd2),
        Reference("path", out_path),
        Reference("path", log2),
    )
    probes = (
        Probe("job", "exact", "What is the id of the background job we are still waiting for?", answer=job2),
        Probe("log", "exact", f"Where does job {job2} write its log?", answer=log2),
        Probe("output", "exact", "Which file will the ledger export write?", answer=out_path),
    )
    truth = GroundTruth(
        mission=mission, mission_key=f"{b.project.name} search index", references=refs, probes=probes
    )
    return b.scenario(truth, "waiting-on and exact references: job ids, paths, commands")


def pitfalls(seed: int, size: int) -> Scenario:
    """S5: a failed approach with a distinctive error, which must not be tried again."""
    b = Builder("pitfalls", seed, size)
    dump = f"/data/{b.project.package}/dump-{b.rng.randint(100, 999)}.bin"
    code, seg = b.rng.randint(1000, 9999), b.rng.randint(0x1000, 0xFFFF)
    expected, got = b.rng.randint(0, 0xFFFF), b.rng.randint(0, 0xFFFF)
    error = f"E{code}: checksum mismatch in segment 0x{seg:x} (expected {expected:04x}, got {got:04x})"
    bad_cmd = f"{b.project.package}ctl import --fast-resume {dump}"
    good_cmd = f"{b.project.package}ctl import --verify-each {dump}"
    mission = b.say(
        f"Our goal for this whole session: import {dump} into the {b.project.name} archive. "
        "I'll hand you smaller tasks along the way."
    )
    segments = b.share(2)
    b.work(segments[0])
    b.reply("Trying the fast path first.", b.tool("shell", {"command": bad_cmd}, error, error=True))
    b.reply(
        f"--fast-resume corrupts segments ({error.split(':')[0]}); switching to --verify-each.",
        b.tool("shell", {"command": good_cmd}, "import running: 12% (segment 0x0200 of 0x1a00)"),
    )
    b.work(segments[1])
    refs = (Reference("error", error), Reference("command", good_cmd), Reference("path", dump))
    probes = (
        Probe(
            "error",
            "exact",
            "What error did the --fast-resume attempt produce? Give its code.",
            answer=f"E{code}",
        ),
        Probe(
            "resume",
            "next_action",
            "The import stopped again. Resume it.",
            expect=("--verify-each",),
            forbid=("--fast-resume",),
        ),
    )
    truth = GroundTruth(mission=mission, mission_key=dump, references=refs, probes=probes)
    return b.scenario(truth, "pitfalls: a failed approach with a distinctive error")


def self_correction(seed: int, size: int) -> Scenario:
    """P3, N3: the user gives a number, then corrects it; only the corrected value holds."""
    b = Builder("self_correction", seed, size)
    svc = f"{b.project.package}-{b.rng.choice(SERVICES)}"
    wrong, right = b.rng.sample((16, 24, 32, 48, 64, 96, 128), 2)
    mission = b.say(
        f"Our goal for this whole session: stop the {svc} connection errors under load. "
        "I'll hand you smaller tasks along the way."
    )
    anchor = f"max_connections of the {svc} pool"
    first = b.say(f"Set the {anchor} to {wrong}.")
    b.reply(f"Will set it to {wrong}.")
    segments = b.share(3)
    b.work(segments[0])
    second = b.say(f"Correction: I meant the {anchor} must be {right}, not {wrong}.")
    b.reply(f"Understood: {right}, not {wrong}.")
    b.work(segments[1])
    b.say(b.filler.nudge())
    b.work(segments[2])
    items = (
        PlantedItem("first", "preference", first, anchor, status="superseded", replaced_by="second"),
        PlantedItem(
            "second",
            "preference",
            second,
            anchor,
            loosened=(f"{anchor} to {wrong}", f"{anchor} must be {wrong}"),
        ),
    )
    probes = (
        Probe("value", "exact", f"What must the {anchor} be? Give the number.", answer=str(right)),
        Probe(
            "apply",
            "next_action",
            f"Write the {svc} pool settings now.",
            expect=(str(right),),
            forbid=(f"max_connections = {wrong}", f"max_connections: {wrong}"),
        ),
    )
    truth = GroundTruth(mission=mission, mission_key=f"{svc} connection errors", items=items, probes=probes)
    return b.scenario(truth, "self correction: the user corrects a number they gave")
