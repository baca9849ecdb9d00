"""``grade check`` several times, by click, in one process of a copy of the kit, on one warm Grader of the copy's.

``python -c "$(cat tests/checks_in_one_process.py)" ARGS_JSON``, run in the copy's folder so that the copy's own
grader is imported (``-c`` puts that folder first on the path, as ``python -m grader`` there does; a script's
path would put this folder there). ARGS_JSON is a list of argument lists; each is run as ``grade check ARGS`` with
the command's Grader the one warm Grader (made as the command makes its own: ``many=False``), as
helpers.check_here does in the tests' own process. Prints one JSON line: each run's exit code, stdout and stderr,
and the file of the ``grader/cli.py`` that ran. An exception a command lets through ends this process with its
traceback, as it would end the command.
"""

import json
import sys
from unittest import mock

from click.testing import CliRunner

from grader import cli as command
from grader.grading import Grader


class OneWarmGrader:
    """What the command's ``Grader(limits, jobs=..., many=...)`` gives it here: ``warm``, under its limits."""

    def __init__(self, limits, **_options):
        self.limits = limits

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def grade(self, request):
        return warm.grade(request, self.limits)


results = []
with Grader(many=False) as warm, mock.patch.object(command, "Grader", OneWarmGrader):
    for args in json.loads(sys.argv[1]):
        run = CliRunner().invoke(command.main, ["check", *args], prog_name="grade", catch_exceptions=False)
        results.append(
            {"file": command.__file__, "returncode": run.exit_code, "stdout": run.stdout, "stderr": run.stderr}
        )
print(json.dumps(results))
