"""Contest-shaped papers: a paper file (parts, points, rules, a time limit), per-student variants, rendering a
student's notebook, and a timed practice session for one student."""
