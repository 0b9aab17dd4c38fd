#!/bin/sh
# expect_exit.sh STATUS N PATTERN... COMMAND [ARGS...]
# Runs COMMAND; passes when it exits with STATUS and its output (stdout and
# stderr together) matches each of the N extended regular expressions.
want=$1 n=$2
shift 2
i=0
pats=""
while [ "$i" -lt "$n" ]; do
    pats="$pats$1
"
    shift
    i=$((i + 1))
done
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if [ "$got" -ne "$want" ]; then
    echo "FAIL: exit status $got, want $want" >&2
    exit 1
fi
printf '%s' "$pats" | while IFS= read -r p; do
    if ! printf '%s\n' "$out" | grep -Eq -- "$p"; then
        echo "FAIL: output does not match: $p" >&2
        exit 1
    fi
done
