"""A Gradescope autograder zip: the grader, its hidden suites and the reference, plus Gradescope's two scripts.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once
while building the image, then ``run_autograder`` for each submission; the
student's files are in ``/autograder/submission`` and the results go to
``/autograder/results/results.json``. Student code runs in the grader's
isolated workers as on any machine; the image's protections are listed in
each report.

The zip's ``README.md`` is the project's, except that a markdown link to a file
the zip does not hold (``datasets/README.md``, say) is left as its text alone, so
that every link in the zip resolves inside it.
"""
from __future__ import annotations

import os
import posixpath
import re
import zipfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# What the autograder needs of the project: the package (suites and sandbox included), the reference,
# what pip needs to install it, and the contract pages the README links to.
SHIPPED = ("grader", "solutions", "pyproject.toml", "README.md", "docs")
# Code (a fenced block or an inline span), left as it is, or an inline markdown link or image,
# [text](target "title"): the two things ``unlinked`` tells apart.
MARKDOWN = re.compile(r"(?P<code>^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^(?P=fence)[^\n]*$|(?P<ticks>`+).+?(?P=ticks))"
                      r'|!?\[(?P<text>[^\]]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+"[^"]*")?\s*\)', re.M | re.S)

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image.
set -euo pipefail
apt-get update -q && apt-get install -y -q python3 python3-pip python3-venv
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
# The CPU build of torch first: a bare `torch` requirement may pull a multi-GB CUDA build.
/autograder/venv/bin/pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q -e /autograder/source
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission. AUTOGRADER_ROOT (default /autograder) lets it run elsewhere.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${GRADE_PYTHON:-$ROOT/venv/bin/python}"
SUBMISSION="$ROOT/submission"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"

# A single notebook is graded as a notebook; anything else as a folder of exercise files.
shopt -s nullglob
notebooks=("$SUBMISSION"/*.ipynb)
scripts=("$SUBMISSION"/*.py)
if [ ${#notebooks[@]} -eq 1 ] && [ ${#scripts[@]} -eq 0 ]; then
    SUBMISSION="${notebooks[0]}"
fi

FAILED='{"score": 0, "tests": [], "output": "The autograder could not grade this submission '\\
'(a usage error or a grader failure); please tell your instructor."}'
cd "$ROOT/source"
if ! "$PYTHON" -m grader check "$SUBMISSION" --format gradescope -o "$RESULTS"; then
    [ -s "$RESULTS" ] || printf '%s\\n' "$FAILED" > "$RESULTS"
fi
"""


def build(out: Path, project: Path = PROJECT) -> list[str]:
    """Write the autograder zip to ``out``; returns the names it holds."""
    if not (project / "solutions" / "m1_attention.py").is_file():
        raise FileNotFoundError(f"no reference solutions in {project / 'solutions'}: build from a checkout of the kit")
    files = {name: (project / name).read_bytes() for name in shipped_files(project)}
    for name in [n for n in files if n.endswith(".md")]:
        files[name] = unlinked(files[name].decode(), name, set(files)).encode()
    files["setup.sh"], files["run_autograder"] = SETUP_SH.encode(), RUN_AUTOGRADER.encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    os.replace(tmp, out)
    return sorted(files)


def unlinked(text: str, name: str, names: set[str]) -> str:
    """``text`` (the markdown file ``name``) with each relative link to a file not in ``names`` replaced by its text."""
    folders = {posixpath.dirname(n) for n in names}
    folders |= {f[:i] for f in folders for i in range(len(f)) if f[i] == "/"}

    def link(m: re.Match) -> str:
        if m["code"] is not None:
            return m[0]
        target = m["target"].split("#")[0]
        if not target or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
            return m[0]  # an anchor in the same page, or a URL
        path = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        return m[0] if path in names or path in folders else m["text"]
    return MARKDOWN.sub(link, text)


def shipped_files(project: Path) -> list[str]:
    names = []
    for top in SHIPPED:
        path = project / top
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        names += [p.relative_to(project).as_posix() for p in paths
                  if "__pycache__" not in p.parts and not p.name.startswith(".")]
    return names
