"""`grade report --png`: the charts a teacher keeps, drawn with matplotlib (labels wrapped at word boundaries)."""

from __future__ import annotations

import re
import statistics
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from .gradebook import NO_SUBMISSION
from .summary import (
    broken_students,
    class_causes,
    failure_counts,
    fraction,
    milestone_shares,
    stubs,
    untouched_counts,
)

if TYPE_CHECKING:  # matplotlib loads only when a chart is drawn
    from matplotlib.figure import Figure

HEATMAP = "milestone-heatmap.png"
CAUSES = "failure-causes.png"
HISTOGRAM = "score-distribution.png"
RATES = "check-failure-rates.png"
SHOWN = 15  # bars in the cause and check charts


def wrap(label: str, width: int = 48, lines: int = 3) -> str:
    """A label over at most ``lines`` lines, broken only between words, never inside brackets ("data[:, 1:]" stays
    whole: its space is a no-break space there), an over-long one ending in '…'."""
    label = re.sub(r"\[[^\[\]]*\]", lambda m: m[0].replace(" ", "\u00a0"), label)
    parts = textwrap.wrap(label, width, break_long_words=False, break_on_hyphens=False) or [""]
    if len(parts) > lines:
        parts = [*parts[: lines - 1], textwrap.shorten(" ".join(parts[lines - 1 :]), width, placeholder=" …")]
    return "\n".join(parts)


def best_first(rows: list[dict], students: set[str]) -> list[str]:
    """``students`` by score / max_score, best first, ties by name (one without a graded row last)."""
    share = {r["student"]: value for r in rows if (value := fraction(r)) is not None}
    return sorted(students, key=lambda s: (-share.get(s, -1.0), s))


def absent(rows: list[dict]) -> list[str]:
    """The students on the roster with no submission (grader/batch/term.py): in the charts at 0, so named."""
    return [r["student"] for r in rows if r["status"] == NO_SUBMISSION]


def draw(rows: list[dict], checks: list[dict], folder: Path, *, late: bool = False) -> list[Path]:
    """Write the four charts into ``folder``; returns their paths. ``late``: the rows' scores are after a late
    policy's penalties (``grade report --late-policy``): the score chart says so."""
    # matplotlib here, not at the top: it takes a second to load, its backend is chosen before pyplot loads, and
    # only `grade report --png` and the coach's charts page draw. The charts' functions import pyplot after this.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig: Figure, name: str) -> None:
        fig.savefig(folder / name, dpi=100, bbox_inches="tight")  # bbox: no label is ever clipped
        plt.close(fig)
        written.append(folder / name)

    stub = stubs(checks)
    graded = [r for r in rows if fraction(r) is not None]
    missing = absent(rows)
    save(heatmap(rows, checks, stub, missing), HEATMAP)
    considered = len([r for r in graded if r["student"] not in stub])
    apart = _apart(checks, stub)
    save(causes_chart(checks, considered, apart, bool(graded)), CAUSES)
    save(histogram(graded, stub, missing, late), HISTOGRAM)
    save(rates_chart(checks, stub, considered, apart, bool(graded)), RATES)
    return written


def heatmap(rows: list[dict], checks: list[dict], stub: set[str], missing: list[str] | None = None) -> Figure:
    """Students x milestones: each cell the share of that milestone's points, best students first; the students
    with no submission (``missing``) last, at 0 on every milestone."""
    import matplotlib.pyplot as plt

    shares = milestone_shares(checks)
    ids = list(shares)
    missing = missing or []
    students = best_first(rows, {s for m in ids for s in shares[m]}) + (sorted(missing) if ids else [])
    for s in missing:
        for m in ids:
            shares[m][s] = 0.0
    # At least 6.5 in wide: the title, over one or two milestones, would run into the colour bar's label.
    fig, ax = plt.subplots(figsize=(max(6.5, 2.2 + 1.1 * len(ids)), 1.4 + 0.3 * max(len(students), 1)))
    grid = [[shares[m].get(s, float("nan")) for m in ids] for s in students]
    image = ax.imshow(grid or [[float("nan")]], cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(ids)), ids)
    crashed = broken_students(checks)  # "hung in m1": a red row that is no wrong answer
    ax.set_yticks(
        range(len(students)),
        [_label(s, stub, crashed, missing) for s in students],
        fontsize=9 if len(students) <= 40 else 6,
    )
    ax.xaxis.tick_top()
    if len(students) * len(ids) <= 600:
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if value == value:  # not NaN
                    ax.text(j, i, f"{100 * value:.0f}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label="share of the milestone's points", fraction=0.05)
    ax.set_title("Score per milestone (%), best students first", pad=24)
    if not grid:
        nothing(ax, NOTHING_GRADED)
    return fig


def _label(student: str, stub: set[str], crashed: dict[str, str], missing: list[str]) -> str:
    """A heatmap row's label: the student, and why their row reads as it does where that is not their answers."""
    if student in missing:
        return f"{student} ({NO_SUBMISSION})"
    if student in stub:
        return f"{student} (stub)"
    return f"{student} ({crashed[student]})" if student in crashed else student


def _apart(checks: list[dict], stub: set[str]) -> str:
    """What the failure charts leave out, as the end of their axis label: untouched stubs and exercises, and the
    submissions that hung or crashed."""
    apart = f", {len(stub)} untouched stub{'s' * (len(stub) != 1)} not counted" if stub else ""
    if left := sum(untouched_counts(checks).values()):
        apart += f"; {left} untouched exercise{'s' * (left != 1)} left out"
    if crashed := len(broken_students(checks)):
        apart += f"; {crashed} that hung or crashed left out"
    return apart


def causes_chart(checks: list[dict], considered: int, apart: str, graded: bool) -> Figure:
    """Failures by likely cause across the class: how many students hit each, wherever it showed, each student once
    per cause (``considered``: the graded students counted)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    causes = class_causes(checks)[:SHOWN]
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.55 * max(len(causes), 1)))
    labels = [wrap(f"{', '.join(ms)}: {cause}") for ms, cause, _ in causes][::-1]
    counts = [n for _, _, n in causes][::-1]
    ax.barh(range(len(causes)), counts, color="tab:red")
    ax.set_yticks(range(len(causes)), labels, fontsize=8)
    for y, n in enumerate(counts):
        ax.text(n, y, f" {n} of {considered}", va="center", fontsize=8)
    ax.set_xlim(0, max([*counts, 1]) * 1.2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(wrap(f"students (of {considered} graded{apart}), each counted once per cause", 90, 2))
    ax.set_title("Failures by likely cause, across the class")
    if not causes:
        nothing(ax, "no failure with a known cause" if graded else NOTHING_GRADED)
    return fig


def histogram(graded: list[dict], stub: set[str], missing: list[str] | None = None, late: bool = False) -> Figure:
    """The score histogram of the ``graded`` rows and of the students with no submission (``missing``, at 0):
    integer counts, mean and median marked; ``late``: the scores are after late penalties, and the title says so."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    missing = missing or []
    scores = [100 * share for r in graded if (share := fraction(r)) is not None] + [0.0] * len(missing)
    among = f", {len(stub)} of them untouched stub{'s' * (len(stub) != 1)}" if stub else ""
    among += f", {len(missing)} with {NO_SUBMISSION} at 0" if missing else ""
    among += ", after late penalties" if late else ""
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(scores, bins=10, range=(0, 100), color="tab:blue", edgecolor="white")
    if scores:
        mean, median = statistics.mean(scores), statistics.median(scores)
        # the mean's dashes over the median's line: where the two are equal, both still show
        ax.axvline(median, color="tab:orange", linestyle="-", linewidth=2.5, label=f"median {median:.1f}%")
        ax.axvline(mean, color="black", linestyle="--", label=f"mean {mean:.1f}%")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars, never over them
    else:
        ax.set_ylim(0, 1)
        nothing(ax, NOTHING_GRADED)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(
        xlabel="score (%)",
        ylabel="students",
        xlim=(0, 100),
        title=f"Score distribution ({len(scores) - len(missing)} graded{among})",
    )
    return fig


def rates_chart(checks: list[dict], stub: set[str], considered: int, apart: str, graded: bool) -> Figure:
    """The most failed checks, stubs left out."""
    import matplotlib.pyplot as plt

    rates = failure_counts([c for c in checks if c["student"] not in stub])[:SHOWN]
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.55 * max(len(rates), 1)))
    failing = [(100 * n / of, n, of) for _, n, of in rates][::-1]
    ax.barh(range(len(rates)), [percent for percent, _, _ in failing], color="tab:purple")
    ax.set_yticks(range(len(rates)), [wrap(f"{m}: {name}") for (m, name), _, _ in rates][::-1], fontsize=8)
    for y, (percent, n, of) in enumerate(failing):
        ax.text(percent, y, f" {n} of {of}", va="center", fontsize=8)
    ax.set(
        xlabel=wrap(f"students failing it (%, of those of the {considered} graded who worked on it{apart})", 90, 2),
        title="Most often failed checks",
        xlim=(0, 125),  # room for the label of a bar at 100%
        xticks=range(0, 101, 20),
    )
    if not rates:
        nothing(ax, "no check failed" if graded else NOTHING_GRADED)
    return fig


NOTHING_GRADED = "nothing graded yet"


def nothing(ax, text: str) -> None:
    """An empty bar chart says so in words, not with a blank frame."""
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=11, color="0.35")
