#!/usr/bin/env bash
# Gradescope runs this for each submission. AUTOGRADER_ROOT (default /autograder) lets it run elsewhere.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${GRADE_PYTHON:-$ROOT/venv/bin/python}"
RESULTS="$ROOT/results/results.json"
# Who sees the hidden suites' checks (Gradescope's levels: visible, after_due_date, after_published, hidden);
# set by `grade gradescope --visibility`. The public checks are always visible, worth 0 points.
VISIBILITY=@visibility
# What results.json lists: one test per milestone (its checks, one line each, in the test's output), or
# one test per check ("check"); set by `grade gradescope --tests`.
TESTS=@tests
mkdir -p "$ROOT/results"
# A late policy, where `grade gradescope --late-policy FILE` put one in the zip (none there: no penalty): the
# submission's time and due date are read from Gradescope's submission_metadata.json.
LATE_POLICY="$ROOT/source/late-policy.toml"
# The class's roster, where `grade gradescope --roster FILE` put one in the zip: it maps the submitter's email or
# name (Gradescope's metadata) to the id a late policy's extension may be keyed by.
ROSTER="$ROOT/source/roster.csv"
METADATA="$ROOT/submission_metadata.json"

# The exercise files or one notebook, in submission/ or in the one folder inside it; the reason for
# anything that cannot be graded goes into the results' output, which students see.
FAILED='{"score": 0, "tests": [], "output": "The autograder could not grade this submission '\
'(a grader failure); please tell your instructor."}'
cd "$ROOT/source" || { printf '%s\n' "$FAILED" > "$RESULTS"; exit 1; }
if ! "$PYTHON" -m grader.bundles.gradescope "$ROOT/submission" "$RESULTS" --visibility "$VISIBILITY" --tests "$TESTS" \
        --late-policy "$LATE_POLICY" --metadata "$METADATA" --roster "$ROSTER"; then
    [ -s "$RESULTS" ] || printf '%s\n' "$FAILED" > "$RESULTS"
fi
