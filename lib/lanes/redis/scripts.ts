// The fleet lanes' Lua scripts: every change to a lane (a request, a leave, a refresh of leases)
// is one atomic script, timed by Redis's own clock (TIME), never a client's. A lane is six keys
// under one hash tag (so a Cluster keeps them on one node):
//   holders   sorted set: request id -> the end of its lease (Redis ms)
//   leases    sorted set: waiting request id -> the end of its lease
//   queue     sorted set, all scores 0, ordered by name: <party length:8><party><seq:16><id>,
//             so each party's waiters are a contiguous range, oldest first (FIFO within a party)
//   places    hash: id -> its queue entry (waiting) or '#' .. its fencing token (holding)
//   rotation  sorted set: party -> seq; the lowest is served next (round-robin between parties)
//   lane      hash: key (the lane's name), limit, seq (the counter behind queue and rotation), fence
//   answers   hash: request id -> the answer its change gave (JSON), and
//   answered  sorted set: request id -> until when that answer is kept (Redis ms)
// A change (request, leave, refresh) carries a request id: sent again after a failed attempt
// (a reset connection, a restart), it gets the answer recorded for its first run, and changes
// nothing more. The answers go with the lane when it is idle.
// The grant rule is the in-process Lane's, step for step (lib/lanes/Lane.ts): granted at once
// when a permit is free and nobody waits; otherwise queued, and each free permit goes to the
// head of the first party in the rotation, which then moves to the back if it still waits.
import { createHash } from 'node:crypto';

/** A script, and the sha1 Redis knows it by (EVALSHA). */
export interface Script {
  readonly source: string;
  readonly sha1: string;
}

export function script(source: string): Script {
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
}

// A change safe to repeat. ARGV: request id, how long its answer is kept (ms), then the
// change's own arguments (argv in its body).
export function change(body: string): Script {
  return script(`${prelude}
local requestId, keepMs = ARGV[1], tonumber(ARGV[2])
local argv = {}
for i = 3, #ARGV do argv[#argv + 1] = ARGV[i] end
local seen = redis.call('HGET', D, requestId)
if seen then return cjson.decode(seen) end
local function run()
${body}
end
local answer = run()
if redis.call('EXISTS', M) == 1 then
  local old = redis.call('ZRANGEBYSCORE', E, '-inf', now, 'LIMIT', 0, 32)
  if #old > 0 then
    redis.call('HDEL', D, unpack(old))
    redis.call('ZREM', E, unpack(old))
  end
  redis.call('HSET', D, requestId, cjson.encode(answer))
  redis.call('ZADD', E, now + keepMs, requestId)
  local ttl = redis.call('PTTL', M)
  if ttl > 0 then
    redis.call('PEXPIRE', D, ttl)
    redis.call('PEXPIRE', E, ttl)
  end
end
return answer
`);
}

// Shared by every script: the keys, Redis's clock, and the steps of the grant rule.
const prelude = String.raw`
local H, W, Q, P, R, M, D, E = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowText = string.format('%.0f', now)
local grants = {}

local function prefixOf(party)
  return string.format('%08d', #party) .. party
end

-- The oldest waiter of the party whose queue entries start with prefix, if any.
local function headOf(prefix)
  return redis.call('ZRANGEBYLEX', Q, '[' .. prefix, '[' .. prefix .. '\255', 'LIMIT', 0, 1)[1]
end

-- A waiter leaves the queue; its party leaves the rotation once it has nobody waiting.
local function withdraw(id)
  local entry = redis.call('HGET', P, id)
  redis.call('ZREM', W, id)
  redis.call('HDEL', P, id)
  if not entry or string.sub(entry, 1, 1) == '#' then return end
  redis.call('ZREM', Q, entry)
  local length = tonumber(string.sub(entry, 1, 8))
  if not headOf(string.sub(entry, 1, 8 + length)) then
    redis.call('ZREM', R, string.sub(entry, 9, 8 + length))
  end
end

-- Set when a change left expired leases behind (it reclaims at most SWEEP of each kind, and
-- passes over at most SWEEP dead waiters): its answer then says the earliest lease ends now, so
-- a process with someone waiting runs the next change at once.
local behind = false
local SWEEP = 100

-- Permits and places whose lease ran out (their process died, or stopped refreshing) go back:
-- at most SWEEP of each per change, so no change holds Redis long however many a dead process
-- left behind (sweeping 50,000 places in one script held Redis 1.2 s). Dead waiters not swept
-- yet are passed over where drain meets them.
local function reclaim()
  local dead = redis.call('ZRANGEBYSCORE', H, '-inf', now, 'LIMIT', 0, SWEEP)
  for i = 1, #dead do
    redis.call('ZREM', H, dead[i])
    redis.call('HDEL', P, dead[i])
  end
  local gone = redis.call('ZRANGEBYSCORE', W, '-inf', now, 'LIMIT', 0, SWEEP)
  for i = 1, #gone do withdraw(gone[i]) end
  if #dead == SWEEP or #gone == SWEEP then behind = true end
end

-- The next fencing token of this lane: larger than every one before it, even after the lane
-- was idle and forgotten, since it never falls below Redis's clock in microseconds (two scripts
-- never run in the same microsecond, and one grants far fewer permits than it runs microseconds).
local function nextFence()
  local last = tonumber(redis.call('HGET', M, 'fence') or '0')
  local token = string.format('%.0f', math.max(last + 1, tonumber(clock[1]) * 1000000 + tonumber(clock[2])))
  redis.call('HSET', M, 'fence', token)
  return token
end

-- Free permits go to waiters: the head of the first party in the rotation, which then moves to
-- the back if it still has someone waiting. A granted waiter keeps the lease it had. A head
-- whose lease ran out (its process died) is withdrawn and passed over, at most SWEEP per change.
local function drain()
  local limit = tonumber(redis.call('HGET', M, 'limit'))
  if not limit then return end
  local holders = redis.call('ZCARD', H)
  local passed = 0
  while holders < limit do
    local party = redis.call('ZRANGE', R, 0, 0)[1]
    if not party then return end
    local prefix = prefixOf(party)
    local entry = headOf(prefix)
    local id = entry and string.sub(entry, #prefix + 17)
    local lease = id and tonumber(redis.call('ZSCORE', W, id) or (now + 1000))
    if not entry then
      redis.call('ZREM', R, party)
    elseif lease <= now then
      withdraw(id)
      passed = passed + 1
      if passed >= SWEEP then
        behind = true
        return
      end
    else
      redis.call('ZREM', Q, entry)
      redis.call('ZREM', W, id)
      if not headOf(prefix) then
        redis.call('ZREM', R, party)
      elseif redis.call('ZCARD', R) > 1 then
        redis.call('ZADD', R, redis.call('HINCRBY', M, 'seq', 1), party)
      end
      local token = nextFence()
      redis.call('HSET', P, id, '#' .. token)
      redis.call('ZADD', H, lease, id)
      holders = holders + 1
      grants[#grants + 1] = id
      grants[#grants + 1] = token
    end
  end
end

local function publish(channel, sharded, message)
  if sharded == '1' then
    -- Sharded pub/sub (Redis 7): the channel shares the lane's hash tag, so it lives on the lane's node.
    local sent = redis.pcall('SPUBLISH', channel, message)
    if type(sent) ~= 'table' or not sent.err then return end
  end
  redis.call('PUBLISH', channel, message)
end

-- Every change ends here: grants published to the processes they are for (with Redis's time and
-- the earliest lease end, so a waiter knows when a dead holder's permit comes back),
-- an idle lane's keys deleted, the keys of a change that extended a lease (lease > 0) kept as
-- long as the longest lease (a lane whose whole fleet died expires by itself), and the answer:
-- now, the earliest lease end, how many grant fields, the grants, then out.
local function finish(channel, sharded, lease, out)
  local first = redis.call('ZRANGE', H, 0, 0, 'WITHSCORES')[2] or ''
  if behind then first = nowText end
  if #grants > 0 then
    -- Each grant goes to the channel of the process that asked (a request id starts with its
    -- process's id and ':'), one message per process: a grant wakes its own process alone.
    local byProcess, order = {}, {}
    for i = 1, #grants, 2 do
      local owner = string.match(grants[i], '^[^:]*')
      local list = byProcess[owner]
      if not list then
        list = {}
        byProcess[owner] = list
        order[#order + 1] = owner
      end
      list[#list + 1] = grants[i]
      list[#list + 1] = grants[i + 1]
    end
    for i = 1, #order do
      publish(channel .. ':' .. order[i], sharded, nowText .. ' ' .. first .. ' ' .. table.concat(byProcess[order[i]], ' '))
    end
  end
  if first == '' and redis.call('ZCARD', W) == 0 then
    redis.call('DEL', Q, P, R, M, D, E)
  elseif lease > 0 then
    local lastHeld = redis.call('ZRANGE', H, -1, -1, 'WITHSCORES')[2]
    local lastWaiting = redis.call('ZRANGE', W, -1, -1, 'WITHSCORES')[2]
    local ttl = math.max(tonumber(lastHeld or 0), tonumber(lastWaiting or 0)) - now + lease
    for i = 1, 6 do redis.call('PEXPIRE', KEYS[i], ttl) end
  end
  local answer = { nowText, first, #grants }
  for i = 1, #grants do answer[#answer + 1] = grants[i] end
  for i = 1, #out do answer[#answer + 1] = out[i] end
  return answer
end
`;

/**
 * A request for a permit. argv (after the request id and how long its answer is kept): id, party, limit (used if the lane is new), lease ms, channel,
 * sharded ('1'/'0'), the lane's key. Out: 'h' and the fencing token (granted at once), or 'w' and ''.
 */
export const acquireScript = change(String.raw`
local id, party, lease = argv[1], argv[2], tonumber(argv[4])
if not redis.call('HGET', M, 'limit') then
  local start = argv[3]
  -- An adaptive lane (its state's key is KEYS[9]: adaptive.ts) starts at the limit the fleet learned.
  if KEYS[9] then start = redis.call('HGET', KEYS[9], 'limit') or start end
  redis.call('HSET', M, 'limit', start, 'key', argv[7])
end
reclaim()
drain()
local out
if redis.call('ZCARD', H) < tonumber(redis.call('HGET', M, 'limit')) and redis.call('ZCARD', W) == 0 then
  local token = nextFence()
  redis.call('ZADD', H, now + lease, id)
  redis.call('HSET', P, id, '#' .. token)
  out = { 'h', token }
else
  local prefix = prefixOf(party)
  local newcomer = not headOf(prefix)
  local entry = prefix .. string.format('%016d', redis.call('HINCRBY', M, 'seq', 1)) .. id
  redis.call('ZADD', Q, 0, entry)
  redis.call('HSET', P, id, entry)
  redis.call('ZADD', W, now + lease, id)
  if newcomer then redis.call('ZADD', R, redis.call('HINCRBY', M, 'seq', 1), party) end
  drain()
  out = { 'w', '' }
end
return finish(argv[5], argv[6], lease, out)
`);

/**
 * A request leaves: its permit goes back (and to the next waiter), or its place in the queue is
 * given up. argv: id, channel, sharded. Out: 'h' (it held), 'w' (it waited) or '' (gone).
 * No lease grows here, so the keys' expiry stands as it is.
 */
export const leaveScript = change(String.raw`
local id = argv[1]
local was = ''
if redis.call('ZREM', H, id) == 1 then
  redis.call('HDEL', P, id)
  was = 'h'
elseif redis.call('ZSCORE', W, id) then
  withdraw(id)
  was = 'w'
end
reclaim()
drain()
return finish(argv[2], argv[3], 0, { was })
`);

/**
 * The heartbeat: the leases of a process's requests on one lane are extended (before anything
 * is reclaimed, so a lease nobody took yet is still its holder's), then dead ones reclaimed and
 * free permits granted. argv: lease ms, channel, sharded, ids... Out, per id: 'h' .. fencing
 * token (it holds: a grant it missed is caught here), 'w' (it waits) or '' (it was lost).
 */
export const refreshScript = change(String.raw`
local lease = tonumber(argv[1])
local out = {}
for i = 4, #argv do
  local id = argv[i]
  if redis.call('ZSCORE', H, id) then
    redis.call('ZADD', H, now + lease, id)
    out[#out + 1] = 'h' .. string.sub(redis.call('HGET', P, id) or '#', 2)
  elseif redis.call('ZSCORE', W, id) then
    redis.call('ZADD', W, now + lease, id)
    out[#out + 1] = 'w'
  else
    out[#out + 1] = ''
  end
end
reclaim()
drain()
return finish(argv[2], argv[3], lease, out)
`);

/**
 * What the fleet holds of one lane, read without changing it (expired leases are not counted).
 * Out: key, limit, holders, waiters, then the parties waiting, in the order they will be served.
 */
export const snapshotScript = script(prelude + String.raw`
local out = {
  redis.call('HGET', M, 'key') or '',
  redis.call('HGET', M, 'limit') or '',
  redis.call('ZCOUNT', H, '(' .. nowText, '+inf'),
  redis.call('ZCOUNT', W, '(' .. nowText, '+inf'),
}
local parties = redis.call('ZRANGE', R, 0, -1)
for i = 1, #parties do out[#out + 1] = parties[i] end
return out
`);
