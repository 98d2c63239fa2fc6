#!/bin/sh
# Plain stdout on exit 0: added as context for SessionStart and UserPromptSubmit.
cat > /dev/null
echo "Team notes: tests live in tests/, run them with pytest."
