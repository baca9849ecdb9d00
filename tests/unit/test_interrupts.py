"""Ctrl-C while a batch starts its pool (grader/batch/run.py): the pool's processes ignore it, the batch gets it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from grader.batch.run import _ignoring_interrupts

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"),
    reason="signals reach the main thread only, on a system with pthread_sigmask",
)


def test_a_ctrl_c_pressed_while_the_pool_starts_reaches_the_batch_afterwards():
    """It used to be ignored for the start's length and lost: the batch then graded every submission."""
    started = []

    def start() -> None:
        os.kill(os.getpid(), signal.SIGINT)  # a terminal's Ctrl-C, in the middle of the start
        time.sleep(0.05)
        started.append(True)

    with pytest.raises(KeyboardInterrupt):
        _ignoring_interrupts(start)
        time.sleep(0.5)  # Python runs the handler at its next check: well before this ends
    assert started, "the start itself ran to its end: the interrupt waited for it"


def test_a_process_started_meanwhile_outlives_a_ctrl_c_sent_to_it():
    children: list[subprocess.Popen] = []

    def start() -> None:
        code = "import time; time.sleep(1.5); print('still grading')"
        children.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True))

    before = signal.getsignal(signal.SIGINT)
    _ignoring_interrupts(start)
    time.sleep(0.5)  # past the child's start-up: its Python's own Ctrl-C handler is in place
    children[0].send_signal(signal.SIGINT)
    out, _ = children[0].communicate(timeout=30)
    assert (children[0].returncode, out.strip()) == (0, "still grading"), "the fork server leaves Ctrl-C to the batch"
    assert signal.getsignal(signal.SIGINT) is before, "the batch's own handler is back"
