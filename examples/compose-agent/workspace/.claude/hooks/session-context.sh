#!/bin/sh
# SessionStart: plain stdout becomes context for the model.
cat >/dev/null
echo "This project's tests: python3 -m unittest discover src (hooks run in hookcage's containers)"
