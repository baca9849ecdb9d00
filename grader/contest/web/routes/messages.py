"""Announcements from the coach to every student, and clarification requests from a student, answered by the
coach to them alone or to everyone (as CMS and DOMjudge have them). Kept in the contest's database, shown on the
student's and the coach's pages (escaped, as every text the pages show), limited in length and in rate."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response

from grader.contest.store import Refused
from grader.contest.web import views
from grader.contest.web.deps import Anyone, Jury, State, Student
from grader.contest.web.state import ContestState
from grader.contest.web.tokens import Who

router = APIRouter(form_limits={"max_files": 0, "max_fields": 8})  # an answer's form has six
MOST_QUESTION = 1000  # characters of a student's question
MOST_TEXT = 2000  # characters of an announcement or an answer
Text = Annotated[str, Form()]
Flag = Annotated[bool, Form()]


def checked(state: ContestState, who: Who, text: str, most: int, what: str) -> str:
    """``text`` stripped, refused if empty, longer than ``most``, or past a student's messages of the minute. A
    coach is not counted: the jury answers a room's questions and regrade requests in bursts, and its tokens are
    the coach's own."""
    text = text.strip()
    if not text:
        raise HTTPException(400, f"the {what} is empty")
    if len(text) > most:
        raise HTTPException(400, f"the {what} is {len(text)} characters long: at most {most}")
    if not who.coach and state.messages.take(f"token:{who.name}", state.clock()):
        most_a_minute = state.settings.messages_per_minute
        raise HTTPException(429, f"too many messages: at most {most_a_minute} a minute; wait a minute")
    return text


@router.post("/ask")
def ask(request: Request, who: Student, state: State, question: Text = "", task: Text = "") -> Response:
    """A student's clarification request, about a task or (``task`` empty) the contest."""
    contest = state.rules()
    if task and contest.task(task) is None and task not in contest.categories:
        about = ", ".join([*(t.id for t in contest.tasks), *contest.categories])
        raise HTTPException(400, f"{task!r} is not a task or a category of this contest ({about})")
    text = checked(state, who, question, MOST_QUESTION, "question")
    cid = state.store.ask(who.name, task or None, state.clock(), text)
    state.store.event(state.clock(), who.name, "question", f"#{cid}{' about ' + task if task else ''}")
    return views.done(request, "/me#messages", {"id": cid}, status=201)


@router.post("/coach/announce")
def announce(request: Request, who: Jury, state: State, text: Text = "") -> Response:
    text = checked(state, who, text, MOST_TEXT, "announcement")
    aid = state.store.announce(state.clock(), text)
    state.store.event(state.clock(), None, "announcement", f"#{aid} to every student", author=who.name)
    return views.done(request, "/coach#messages", {"id": aid}, status=201)


@router.post("/coach/claim")
def claim(
    request: Request, who: Jury, state: State, question: Annotated[int, Form()], take_over: Flag = False
) -> Response:
    """``who`` takes question ``question`` on: the page shows it is theirs, and another jury member's answer is
    refused until they take it over (``take_over``)."""
    try:
        taken_from = state.store.claim(question, who.name, state.clock(), take_over)
    except LookupError as e:
        raise HTTPException(404, str(e)) from None
    except Refused as e:
        raise HTTPException(e.status, str(e)) from None
    if taken_from:
        detail = f"question #{question} taken over from {taken_from}"
        state.store.event(state.clock(), None, "claim", detail, author=who.name)
    return views.done(request, f"/coach#question-{question}", {"id": question, "claimed_by": who.name})


@router.post("/coach/answer")
def answer(
    request: Request,
    who: Jury,
    state: State,
    question: Annotated[int, Form()],
    text: Text = "",
    public: Flag = False,
    canned: Text = "",
    take_over: Flag = False,
    replace: Flag = False,
) -> Response:
    """Answer question ``question``: to its student alone, or (``public``) to every student. ``canned``: the
    number (from 1) of one of the contest's ready answers ([clarifications] canned), sent when ``text`` is empty.
    Answering claims the question; one another jury member claimed is refused (409) unless ``take_over``, and
    one answered already unless ``replace`` (the old answer kept in the event log)."""
    ready = state.rules().canned
    if canned.strip() and not text.strip():
        if not canned.strip().isdigit() or not 1 <= int(canned) <= len(ready):
            raise HTTPException(400, f"canned must be a ready answer's number, 1 to {len(ready)}")
        text = ready[int(canned) - 1]
    text = checked(state, who, text, MOST_TEXT, "answer")
    try:
        found = state.store.answer(question, state.clock(), text, public, who.name, take_over, replace)
    except Refused as e:
        raise HTTPException(e.status, str(e)) from None
    if not found:
        raise HTTPException(404, f"no question {question}")
    to = "every student" if public else "its student"
    state.store.event(
        state.clock(),
        None,
        "answer",
        f"question #{question} answered to {to}{' (canned)' if text in ready else ''}: {text[:80]}",
        author=who.name,
    )
    return views.done(request, "/coach#messages", {"id": question, "public": public})


@router.get("/api/messages")
def messages(who: Anyone, state: State) -> dict[str, Any]:
    """The announcements and the questions ``who`` may read (the coach: every question)."""
    return views.messages(state, who)
