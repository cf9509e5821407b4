// The test of snowflake-lease.mjs against real servers, driven by pgrx-tests/tests/app_leases.rs.
//
//   node snowflake-lease-check.mjs CONNINFO LABEL make N   N IDs, printed one a line, then released
//   node snowflake-lease-check.mjs CONNINFO LABEL hold     IDs every few ms until killed; an error
//                                                          line ("error: Class: text") per failure
//   node snowflake-lease-check.mjs CONNINFO LABEL clock    the clock stepped back and ahead
//   node snowflake-lease-check.mjs CONNINFO - bench SECS   bench/lease-clients: acquire to first
//                                                          ID, IDs per second, @sapphire/snowflake's
//                                                          beside (its path in SAPPHIRE_SNOWFLAKE)
//   node snowflake-lease-check.mjs CONNINFO - idle SECS    a lease held SECS seconds, no ID made
//
// Every line is "lease NODE CEILING LEASE_MS", "id ID", "key ID" (the recipe's, under a lease of
// its own), "error: ..." or "done"; a failed assert exits non-zero.
import assert from 'node:assert/strict';
import {
  CeilingReached, ClockBehind, LeaseError, SnowflakeLease, clocks,
} from './snowflake-lease.mjs';

const say = (text) => console.log(text);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// snippet: lease
// Kafka keys for orders, made in this process under a node id leased from the fleet.
async function keyed(connectionString, orders) {
  const ids = await SnowflakeLease.acquire({ connectionString }, 'orders-producer');
  try {
    const keyed = [];
    for (const order of orders) keyed.push([await ids.nextId(), order]); // BigInt keys
    return keyed;
  } finally {
    await ids.close();
  }
}
// end snippet

async function make(lease, n) {
  const ids = [];
  for (let i = 0; i < n; i += 1) ids.push(await lease.nextId());
  for (let i = 1; i < ids.length; i += 1) assert.ok(ids[i] > ids[i - 1], 'IDs not increasing');
  for (const id of ids) say(`id ${id}`);
}

async function hold(lease) {
  for (;;) {
    try {
      say(`id ${await lease.nextId()}`);
    } catch (error) {
      if (!(error instanceof LeaseError)) throw error;
      say(`error: ${error.name}: ${error.message}`);
    }
    await sleep(2);
  }
}

async function clock(lease) {
  const real = clocks.wall;
  let offset = 0;
  clocks.wall = () => real() + offset;
  const ids = [await lease.nextId()];
  // Back by a second: held until the clock passes the last ID, never backwards.
  offset = -1000;
  const started = performance.now();
  for (let i = 0; i < 5000; i += 1) ids.push(await lease.nextId());
  const held = (performance.now() - started) / 1000;
  assert.ok(held >= 0.9, `held ${held} s for a step back of 1 s`);
  say(`held ${held.toFixed(2)} s`);
  // Back by an hour: the last ID's sequence is used up, then the wait would outlast the lease.
  offset = -3_600_000;
  await assert.rejects(async () => {
    for (let i = 0; i <= 2 ** lease.layout.sequenceBits; i += 1) ids.push(await lease.nextId());
  }, (error) => {
    say(`error: ${error.name}: ${error.message}`);
    return error instanceof ClockBehind;
  });
  // Ahead by an hour: past the ceiling.
  offset = 3_600_000;
  await assert.rejects(lease.nextId(), (error) => {
    say(`error: ${error.name}: ${error.message}`);
    return error instanceof CeilingReached;
  });
  offset = 0;
  ids.push(await lease.nextId());
  for (let i = 1; i < ids.length; i += 1) assert.ok(ids[i] > ids[i - 1], 'an ID went backwards');
  for (const id of ids) say(`id ${id}`);
}

const [conninfo, label, mode, n] = process.argv.slice(2);
// A libpq keyword string, as the Rust test passes it, made a pg configuration.
const config = Object.fromEntries(conninfo.split(' ').map((pair) => pair.split('=')));
const connectionString = `postgresql://${config.user}@${config.host}:${config.port}/${config.dbname}`;
// IDs per second from one caller of nextId for secs seconds (awaited: nextId is a promise).
async function rate(nextId, secs) {
  let n = 0;
  const start = performance.now();
  const end = start + secs * 1000;
  for (;;) {
    for (let i = 0; i < 1000; i += 1) await nextId();
    n += 1000;
    if (performance.now() >= end) return n / ((performance.now() - start) / 1000);
  }
}

if (mode === 'bench' || mode === 'idle') {
  const secs = Number(n);
  const started = performance.now();
  const lease = await SnowflakeLease.acquire({ connectionString }, mode);
  if (mode === 'idle') await sleep(secs * 1000);
  else {
    await lease.nextId();
    say(`first_id_ms ${(performance.now() - started).toFixed(1)}`);
    say(`lease_ids_per_s ${(await rate(() => lease.nextId(), secs)).toFixed(0)}`);
  }
  await lease.close();
  if (mode === 'bench' && process.env.SAPPHIRE_SNOWFLAKE) {
    const { Snowflake } = await import(process.env.SAPPHIRE_SNOWFLAKE);
    const other = new Snowflake(1704067200000n);
    say(`other @sapphire/snowflake ${(await rate(() => other.generate(), secs)).toFixed(0)}`);
  } else if (mode === 'bench') say('other none');
  process.exit(0);
}
if (mode === 'make') {
  const keys = (await keyed(connectionString, ['apple', 'pear'])).map(([key]) => key);
  assert.ok(keys[0] < keys[1], `${keys}`);
  for (const key of keys) say(`key ${key}`);
}
const lease = await SnowflakeLease.acquire({ connectionString }, label);
try {
  say(`lease ${lease.nodeId} ${lease.ceilingMs} ${lease.leaseMs}`);
  if (mode === 'make') await make(lease, Number(n));
  else if (mode === 'hold') await hold(lease);
  else if (mode === 'clock') await clock(lease);
  else throw new Error(`unknown mode ${mode}`);
} finally {
  await lease.close();
}
say('done');
