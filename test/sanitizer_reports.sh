#!/bin/sh
# sanitizer_reports.sh LOG...: a FAIL line for each log that holds a report
# of AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer (the first
# lines of it follow); exit 1 when any does. For the logs of processes that
# tests start and stop (webhook and controller replicas), whose reports
# nobody would otherwise read: a leak or undefined behaviour reached only
# through a real kube-apiserver must fail the suite.
pat='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer'
bad=0
for f in "$@"; do
    [ -f "$f" ] || continue
    if grep -qE "$pat" "$f"; then
        echo "FAIL - sanitizer report in $(basename "$f")"
        grep -E -A40 "$pat" "$f" | head -60
        bad=1
    fi
done
exit "$bad"
