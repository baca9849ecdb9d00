#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image.
set -euo pipefail
apt-get update -q && apt-get install -y -q python3 python3-pip python3-venv
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
# The CPU build of torch first: a bare `torch` requirement may pull a multi-GB CUDA build.
/autograder/venv/bin/pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q -e /autograder/source
