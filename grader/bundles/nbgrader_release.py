"""nbgrader's ClearSolutions, putting back the stub's own line where the source names it.

nbgrader replaces every solution region with ``raise NotImplementedError()``. At the top
level of a cell that would stop the cell at its first answer (the quiz's ``Q1 = None``
would become a raise, and Q2 to Q8 would never be defined), and inside a function it
drops the stub's hint (``raise NotImplementedError("generate: crop to model.T, ...")``).
So the source notebook's BEGIN lines name the stub's line:
``### BEGIN SOLUTION (release: Q1 = None)``; this preprocessor writes that line, at the
region's indentation, where nbgrader would write its stub. A region without it gets
nbgrader's stub. ``nbgrader_config.py`` (written by ``grade nbgrader``) puts this class
in ClearSolutions' place in ``generate_assignment``.
"""

from __future__ import annotations

import re

from nbgrader.preprocessors import ClearSolutions

RELEASE = re.compile(r"\(release: (.*)\)\s*$")


class ClearAnswers(ClearSolutions):
    def _replace_solution_region(self, cell, language: str) -> bool:
        if cell.cell_type != "code":
            return super()._replace_solution_region(cell, language)
        out: list[str] = []
        in_solution = replaced = False
        for line in cell.source.split("\n"):
            if self.begin_solution_delimeter in line:
                if in_solution:
                    raise RuntimeError("encountered nested begin solution statements")
                in_solution = replaced = True
                indent = line[: len(line) - len(line.lstrip())]
                named = RELEASE.search(line)
                out += (
                    [indent + named.group(1)] if named else [indent + s for s in self.code_stub[language].split("\n")]
                )
            elif self.end_solution_delimeter in line:
                in_solution = False
            elif not in_solution:
                out.append(line)
        if in_solution:
            raise RuntimeError("no end solution statement found")
        cell.source = "\n".join(out)
        return replaced
