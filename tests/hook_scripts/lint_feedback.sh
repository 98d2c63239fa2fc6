#!/bin/sh
# PostToolUse: exit 2 sends stderr back to the model as feedback.
cat > /dev/null
echo "lint: 3 warnings in the file you just wrote" >&2
exit 2
