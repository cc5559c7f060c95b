-- wrk script: GET a different stored key on every request, cycling through
-- the keys listed one a line in args[1] (each thread from its own offset),
-- so the reads spread over every master of a Cluster; prints a JSON summary.
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  paths = {}
  for key in io.lines(args[1]) do
    table.insert(paths, "/v1/artifacts/" .. key)
  end
  n = id * 7919
end

function request()
  n = n + 1
  return wrk.format("GET", paths[n % #paths + 1])
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"errors":%d,"non2xx":%d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect + e.read + e.write + e.timeout, e.status))
end
