#!/bin/sh
# A hook with a bug: a non-blocking error (exit status 1).
cat > /dev/null
echo "hook script crashed: missing config" >&2
exit 1
