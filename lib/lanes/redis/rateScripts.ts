// The Lua scripts of the fleet's rate lanes (rate.ts is the process's side): what Redis decides
// for a rate lane, by its own clock (TIME), in one script each: an admission, a call reported
// late, its start, an admission given back, the leases of late calls renewed, a pause, and what a
// learning lane does not count.
import { script, type Script } from './scripts.js';

// One hash per rate lane: `tat` (when the bucket is empty until, Redis ms) and `paused` (until when).
// ARGV: the ms between admissions, how many ms early the burst lets one come, and the horizon:
// an admission due within that many ms is reserved now ('r' and the ms until it: the asker lets
// its head go then, without asking again), so the slots of the steady rate are kept by Redis's
// clock and a late timer or a round trip never thins them. Replies as text ('0': admitted now; a
// number: ask again after that many ms), since Redis would cut a Lua number to an integer.
// KEYS[2]: the lane's calls reported late, not yet started (a sorted set, scored by when each
// lease ends); ARGV[5] the new admission's name, ARGV[7] the burst. The bucket, debited for every
// admission at its slot, must cover every late reservation and the new one: while they fill the
// burst the asker is told to ask again shortly (or sooner, when one of its own starts or comes
// back), since when they start is not known. An admission's reply ends with
// '@<slot>~<before>~<after>' (Redis ms): its slot, and `tat` before and after it was debited, so
// a report of it may take the debit back while nothing was admitted since (`tat` still <after>).
// ARGV[4] '1': a lane that learns its pace (the rule of PaceLearner, RateLane.ts): its interval
// is the pace kept in the hash (`pace`, calls a second; none yet: every call at once), grown by
// one a second per second since it last changed; each admission is counted (`count`) in the
// current cycle (`cycle`), and an admission's reply ends with '|<cycle>|<pace>'. Its hash is kept
// an hour after its last use, so what it learned outlives a quiet spell.
export const admitScript: Script = script(String.raw`
local K = KEYS[1]
local interval, tolerance, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local learn = ARGV[4] == '1'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local pace = 0
if learn then
  pace = tonumber(redis.call('HGET', K, 'pace') or '0')
  if pace > 0 then
    local grew = tonumber(redis.call('HGET', K, 'grew') or '0')
    if now - grew >= 1000 then
      pace = pace + math.floor((now - grew) / 1000)
      redis.call('HSET', K, 'pace', string.format('%.3f', pace), 'grew', string.format('%.3f', now))
    end
    interval = 1000 / pace
  else
    interval = 0
  end
  tolerance = 0
  horizon = 20
  if interval >= 40 then horizon = math.min(interval / 2, 1000) end
end
local function keep(ms)
  if learn then ms = math.max(ms, 3600000) end
  redis.call('PEXPIRE', K, ms)
end
local function counted(reply)
  if not learn then return reply end
  redis.call('HINCRBY', K, 'count', 1)
  return reply .. '|' .. (redis.call('HGET', K, 'cycle') or '0') .. '|' .. string.format('%.3f', pace)
end
local O, burst = KEYS[2], tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', O, '-inf', now)
local out = redis.call('ZCARD', O)
local tat = tonumber(redis.call('HGET', K, 'tat') or '0')
-- The admission debits the bucket from its slot: '@<slot>~<tat before>~<tat after>'.
local function debit(slot)
  local before = string.format('%.3f', math.max(tat, now))
  tat = math.max(tat, now) + interval
  local after = string.format('%.3f', tat)
  redis.call('HSET', K, 'tat', after)
  keep(math.ceil(tat - now) + 1000)
  return '@' .. string.format('%.3f', slot) .. '~' .. before .. '~' .. after
end
local paused = tonumber(redis.call('HGET', K, 'paused') or '0')
if paused > 0 then
  -- A pause ends at the steady rate, without a burst: the bucket is empty when it ends.
  tat = math.max(tat, paused + tolerance)
  redis.call('HDEL', K, 'paused')
  redis.call('HSET', K, 'tat', string.format('%.3f', tat))
end
keep(math.ceil(math.max(tat, now) - now) + 1000)
if learn then burst = 1 end
if interval > 0 and out >= burst then
  -- Every slot the burst has is reserved: ask again once one may have started.
  return string.format('%.3f', math.max(1, math.min(interval / 2, 250)))
end
local at = math.max(tat, now) + out * interval - tolerance
if at > now then
  if at - now <= horizon then
    return counted('r' .. string.format('%.3f', at - now) .. debit(at))
  end
  -- Never '0.000': that reads as admitted.
  return string.format('%.3f', math.max(0.001, at - now - horizon))
end
return counted('0' .. debit(now))
`);

// A learning lane's pause (ARGV: the pause's end, Redis ms), when a new one: not one more refusal
// of the same window (the last pause has ended, 'since' <= now). The pace is what went through
// since the last pause ended (admitted, less the refused call that set this one off) over the
// time from then to this one's end; nothing through halves the pace before. A new cycle begins.
const learnOnPause = String.raw`
local function learnPace(untilMs, now)
  local since = tonumber(redis.call('HGET', K, 'since') or '0')
  if since > now then return end
  if since > 0 and untilMs > since then
    local through = tonumber(redis.call('HGET', K, 'count') or '0') - 1
    local before = tonumber(redis.call('HGET', K, 'pace') or '0')
    local ms = untilMs - since
    local pace = math.max(before / 2, 1000 / ms)
    if through > 0 then pace = through * 1000 / ms end
    redis.call('HSET', K, 'pace', string.format('%.3f', pace), 'through', through, 'ms', string.format('%.3f', ms), 'before', string.format('%.3f', before))
  end
  redis.call('HSET', K, 'since', string.format('%.3f', untilMs), 'grew', string.format('%.3f', untilMs), 'count', 0)
  redis.call('HINCRBY', K, 'cycle', 1)
end
`;

// A call a learning lane admitted in cycle ARGV[1] never started: not counted in that cycle, or
// taken back from the pace the last cycle gave (it is often told after that cycle's pause began).
export const notThroughScript: Script = script(String.raw`
local K = KEYS[1]
local cycle = tonumber(redis.call('HGET', K, 'cycle') or '0')
local of = tonumber(ARGV[1])
if of == cycle then
  if tonumber(redis.call('HGET', K, 'count') or '0') > 0 then redis.call('HINCRBY', K, 'count', -1) end
elseif of == cycle - 1 then
  local ms = tonumber(redis.call('HGET', K, 'ms') or '0')
  if ms > 0 then
    local through = tonumber(redis.call('HGET', K, 'through') or '0') - 1
    local pace = math.max(tonumber(redis.call('HGET', K, 'before') or '0') / 2, 1000 / ms)
    if through > 0 then pace = through * 1000 / ms end
    redis.call('HSET', K, 'through', through, 'pace', string.format('%.3f', pace))
  end
end
return 1
`);

// Takes back an admission's debit (ARGV[i]: `tat` before it, ARGV[i + 1]: after it) while nothing
// was admitted since: `tat` still reads as it left it. Else the debit stays (fewer calls, never more).
const takeBack = String.raw`
local function takeBack(i)
  if ARGV[i + 1] ~= '' and redis.call('HGET', K, 'tat') == ARGV[i + 1] then redis.call('HSET', K, 'tat', ARGV[i]) end
end
`;

// A call not started within its grace (ARGV: its name, its lease in ms, `tat` before and after
// its admission): a reservation until it starts or comes back, and its debit taken back if nothing
// was admitted since (the reservation holds its slot now).
export const lateScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local lease = tonumber(ARGV[2])
redis.call('ZADD', O, now + lease, ARGV[1])
redis.call('PEXPIRE', O, lease + 1000)
takeBack(3)
return 1
`);

// A late call started (ARGV: its name, when it started by the server's clock as the process
// reckons it, the ms between admissions, '1' for a learning lane; then, for one whose lateness was
// not reported, `tat` before and after its admission, else ''): the bucket is debited from then
// (never later than now), whether or not its lease ran out meanwhile.
export const startedScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
redis.call('ZREM', O, ARGV[1])
takeBack(5)
local interval = tonumber(ARGV[3])
if ARGV[4] == '1' then
  local pace = tonumber(redis.call('HGET', K, 'pace') or '0')
  interval = 0
  if pace > 0 then interval = 1000 / pace end
end
local at = math.min(tonumber(ARGV[2]), now)
local tat = math.max(tonumber(redis.call('HGET', K, 'tat') or '0'), at) + interval
redis.call('HSET', K, 'tat', string.format('%.3f', tat))
local ttl = redis.call('PTTL', K)
if ttl < math.ceil(tat - now) + 1000 then redis.call('PEXPIRE', K, math.ceil(tat - now) + 1000) end
return 1
`);

// An admission given back (ARGV: its name, then `tat` before and after it, or '' for one reported
// late, whose debit is counted already): its call never started.
export const returnedScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
redis.call('ZREM', O, ARGV[1])
takeBack(2)
return 1
`);

// The leases of reservations whose calls still wait (ARGV: the lease in ms, then their names),
// renewed from now; one whose lease already ran out is not brought back.
export const renewScript: Script = script(String.raw`
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, ARGV[i]) end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], lease + 1000) end
return 1
`);

// ARGV: how many ms to pause, the channel, the message, and '1' for a lane that learns its pace
// (learnOnPause). Keeps the later of two pauses.
export const pauseScript: Script = script(String.raw`
local K = KEYS[1]
${learnOnPause}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local untilMs = now + tonumber(ARGV[1])
if ARGV[4] == '1' then learnPace(untilMs, now) end
local old = tonumber(redis.call('HGET', K, 'paused') or '0')
if untilMs > old then redis.call('HSET', K, 'paused', string.format('%.3f', untilMs)) end
local ttl = redis.call('PTTL', K)
if ttl < math.ceil(untilMs - now) + 1000 then redis.call('PEXPIRE', K, math.ceil(untilMs - now) + 1000) end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`);
