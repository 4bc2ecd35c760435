#!/bin/sh
# SessionStart: plain stdout becomes context for the model.
cat >/dev/null
echo "This project is tested with: python3 -m unittest discover src"
