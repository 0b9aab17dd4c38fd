-- wrk script: with $GQ_BENCH_BODY set, POST that file (an AdmissionReview)
-- as application/json to the URL's path; with it empty, GET the path.
-- Prints a machine-readable summary line at the end.
local path = os.getenv("GQ_BENCH_BODY")
if path and path ~= "" then
  local f = assert(io.open(path, "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
                 + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT rps=%.0f p50_ms=%.3f p99_ms=%.3f errors=%d\n",
    summary.requests / secs, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors))
end
