#!/bin/sh
cat > /dev/null
echo '{"continue": false, "stopReason": "maintenance window: the agent is paused", "systemMessage": "paused by hook"}'
