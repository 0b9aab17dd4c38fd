-- wrk script: GET the URL's path; same summary line as post-review.lua.
function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
                 + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT rps=%.0f p50_ms=%.3f p99_ms=%.3f errors=%d\n",
    summary.requests / secs, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors))
end
