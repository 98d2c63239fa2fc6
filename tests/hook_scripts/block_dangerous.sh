#!/usr/bin/env bash
# Exit-code style blocker: status 2 with the reason on stderr when the payload mentions "danger".
payload=$(cat)
case "$payload" in
  *danger*)
    echo "policy: the word danger is not allowed here" >&2
    exit 2
    ;;
esac
exit 0
