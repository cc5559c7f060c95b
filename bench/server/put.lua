-- wrk script: PUT a different pre-built bundle on every request. Bundles are
-- files <dir>/<key> listed in <dir>/index, split between wrk threads so no
-- key is sent twice until a thread runs out (then it starts over and the
-- server answers 200 "already present": counted apart as "repeats").
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  dir = args[1]
  nthreads = tonumber(args[2])
  bodies, paths = {}, {}
  local i = 0
  for key in io.lines(dir .. "/index") do
    if i % nthreads == id then
      local f = io.open(dir .. "/" .. key, "rb")
      table.insert(bodies, f:read("*a"))
      f:close()
      table.insert(paths, "/v1/artifacts/" .. key)
    end
    i = i + 1
  end
  n = 0
  stored, repeats = 0, 0
end

function request()
  n = n + 1
  local j = (n - 1) % #bodies + 1
  return wrk.format("PUT", paths[j], {["Content-Type"] = "application/octet-stream"}, bodies[j])
end

function response(status, headers, body)
  if status == 201 then stored = stored + 1 elseif status == 200 then repeats = repeats + 1 end
end

done = function(summary, latency, requests)
  local s, r = 0, 0
  for _, t in ipairs(threads) do
    s = s + t:get("stored")
    r = r + t:get("repeats")
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"errors":%d,"non2xx":%d,"stored":%d,"repeats":%d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect + e.read + e.write + e.timeout, e.status, s, r))
end
