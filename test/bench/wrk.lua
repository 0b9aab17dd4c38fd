-- wrk script: with $GQ_BENCH_BODIES set (space-separated files), POST those
-- AdmissionReviews in rotation as application/json to the URL's path; with
-- $GQ_BENCH_BODY set, POST that one file; with neither, GET the path.
-- Prints a machine-readable summary line at the end.
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local bodies = {}
local list = os.getenv("GQ_BENCH_BODIES")
if list and list ~= "" then
  for path in string.gmatch(list, "%S+") do
    bodies[#bodies + 1] = slurp(path)
  end
else
  local path = os.getenv("GQ_BENCH_BODY")
  if path and path ~= "" then
    bodies[1] = slurp(path)
  end
end

if #bodies > 0 then
  wrk.method = "POST"
  wrk.body = bodies[1]
  wrk.headers["Content-Type"] = "application/json"
end

if #bodies > 1 then
  -- Requests are built once per body; request() only picks the next one.
  local reqs, n = {}, 0
  function init(args)
    for i, b in ipairs(bodies) do
      reqs[i] = wrk.format("POST", nil, nil, b)
    end
  end
  function request()
    n = n % #reqs + 1
    return reqs[n]
  end
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
                 + summary.errors.status + summary.errors.timeout
  io.write(string.format("RESULT rps=%.0f p50_ms=%.3f p99_ms=%.3f errors=%d requests=%d\n",
    summary.requests / secs, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors, summary.requests))
end
