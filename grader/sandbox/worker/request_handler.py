"""What a worker runs: it answers the grading process's requests inside a forked child.

The fork server (``fork_server.py``) forks one worker per request for one; the worker
imports the student's modules and answers a small menu of requests (``Request`` in
``../common/agreement.py``: import, call, getattr, value, state_dict, describe, load,
input_grad, grads, count_positions, standin, count_ops, save, restore, run) with plain data.

This file is the dispatch: the menu, the serve loop, and each reply's shape (a value, a
handle, or an error marked as the student's or the grader's). The requests themselves live
by what they do in ``ops_calls.py``, ``ops_state.py`` and ``ops_probes.py``; whose fault an
error is, in ``faults.py``. The sibling files import one another one way only, by relative
imports; the fork server imports this one, and with it all of them.

Nothing here decides a grade: the grading process checks every value it gets.
Loaded by path by the fork server, so it imports nothing from the ``grader`` package.
"""

from __future__ import annotations

from ..common.agreement import Reply, Request
from .faults import BLAME, describe, grader_fault, grader_trace
from .ops_calls import CallOps
from .ops_probes import ProbeOps
from .ops_state import StateOps


class RequestHandler(CallOps, StateOps, ProbeOps):
    """Answers the grading process's requests inside a forked child, one at a time, until it hangs up."""

    def __init__(self, sock, student_modules: tuple[str, ...], files):
        super().__init__(files.protocol)
        self.sock, self.student_modules = sock, student_modules
        self.wire, self.standin = files.wire, files.standin
        self.menu = {
            Request.IMPORT: self.op_import,
            Request.CALL: self.op_call,
            Request.GETATTR: self.op_getattr,
            Request.VALUE: self.op_value,
            Request.STATE_DICT: self.op_state_dict,
            Request.DESCRIBE: self.op_describe,
            Request.LOAD: self.op_load,
            Request.INPUT_GRAD: self.op_input_grad,
            Request.GRADS: self.op_grads,
            Request.COUNT_POSITIONS: self.op_count_positions,
            Request.STANDIN: self.op_standin,
            Request.COUNT_OPS: self.op_count_ops,
            Request.SAVE: self.op_save,
            Request.RESTORE: self.op_restore,
            Request.RUN: self.op_run,
        }

    def serve(self) -> None:
        while True:
            try:
                request, blobs = self.wire.recv(self.sock)
            except EOFError:
                return
            out: list[bytes] = []
            BLAME.clear()
            try:
                result = self.menu[request["op"]](request, blobs)
                keep = request.get("keep", False)
                reply = {Reply.VALUE: self.handle(result) if keep else self.protocol.encode(result, out, self.handle)}
            except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are student errors too
                out = []
                reply = {Reply.ERROR: describe(e)}
                if grader_fault(e):  # the grading process must not blame the student for it
                    reply[Reply.ERROR].update({Reply.GRADER_FAULT: True, Reply.TRACE: grader_trace(e)})
            self.wire.send(self.sock, reply, out)
