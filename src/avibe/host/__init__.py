"""The session host: one live session - its inbox, its agent, its sources, its events (DESIGN.md)."""

from avibe.host.agent import Agent, Inbox, Input, TurnResult, render_input
from avibe.host.events import Event, EventSink, event_to_dict, ignore_events
from avibe.host.session import SessionHost

__all__ = [
    "Agent",
    "Event",
    "EventSink",
    "Inbox",
    "Input",
    "SessionHost",
    "TurnResult",
    "event_to_dict",
    "ignore_events",
    "render_input",
]
