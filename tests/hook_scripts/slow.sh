#!/bin/sh
# Never answers in time; records its pid so a test can check it was killed.
echo $$ > "$1"
sleep 60
