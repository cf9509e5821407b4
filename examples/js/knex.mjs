// pg_snowflake with Knex (on node-postgres): the recipe of docs/CLIENTS.md#knex, and its test.
//
// Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
// NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
// Every check is an assert; a failed one exits non-zero.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import knexFactory from 'knex';

const NODE_ID = 7; // the test server's pg_snowflake.node_id (scripts/test/clients)
const LARGEST = '9223372036854775807'; // the last ID of the layout: 19 digits, i64::MAX
const MESSAGES = { // the errors of point 5, as the server words them
  F0000: 'pg_snowflake.node_id is not set',
  55000: 'pg_snowflake must be loaded via shared_preload_libraries',
};
const say = (words) => console.log(`knex: ${words}`);

// snippet: connect
const migrations = {
  directory: fileURLToPath(new URL('migrations', import.meta.url)),
  loadExtensions: ['.mjs'],
};
const connect = (url) => knexFactory({ client: 'pg', connection: url, migrations });
// end snippet

const knex = connect(process.env.DATABASE_URL);
await knex.migrate.latest();
const { rows: [{ column_default: columnDefault }] } = await knex.raw(
  "SELECT column_default FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'id'");
assert.equal(columnDefault, 'snowflake_nextval()');
say('1. migration made orders.id bigint DEFAULT snowflake_nextval()');

// snippet: insert
const [{ id }] = await knex('orders').insert({ item: 'apple' }).returning('id');

const rows = Array.from({ length: 5000 }, (_, i) => ({ item: `bulk ${i}` }));
const bulk = await knex('orders').insert(rows).returning('id'); // one INSERT, 5,000 VALUES
const bulkIds = bulk.map((row) => row.id); // strings (node-postgres' int8), in order
// end snippet
assert.equal(typeof id, 'string');
assert.match(id, /^[1-9][0-9]{17,18}$/);
await checkBulk(bulkIds);
say(`2. single insert returned '${id}'; 5,000 bulk IDs returned in order`);

// snippet: round-trip
const END = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')";
const { largest } = await knex.first(knex.raw(`${END} AS largest`));
const json = JSON.stringify({ id: largest }); // '{"id":"9223372036854775807"}'
const back = JSON.parse(json).id;
const { same } = await knex.first(knex.raw(`?::bigint = ${END} AS same`, [back]));
// end snippet
assert.equal(typeof largest, 'string');
assert.equal(largest, LARGEST);
assert.equal(json, '{"id":"9223372036854775807"}');
assert.equal(back, LARGEST);
assert.equal(same, true);
assert.notEqual(String(Number(largest)), LARGEST); // the lossy path, not taken
const found = await knex('orders').where({ id: JSON.parse(JSON.stringify({ id })).id }).first();
assert.equal(found.item, 'apple');
say('3. 19 digits as strings through Knex and JSON, never a Number');

await seedHistory(); // 100,000 older rows: the table of an application that has run a while

// snippet: decode
const decoded = await knex('orders as o')
  .crossJoin(knex.raw('snowflake_decode(o.id) AS d'))
  .select('d.ts', 'd.node_id', 'd.seq', knex.raw('snowflake_timestamp(o.id) AS ts_only'))
  .where('o.id', id)
  .first();

const lastHour = knex('orders').select('id')
  .where('id', '>=', knex.raw("snowflake_from_timestamp(now() - interval '1 hour')"));
const recent = await lastHour;
const { rows: planRows } = await knex.raw(`EXPLAIN ${lastHour.toQuery()}`);
const plan = planRows.map((row) => row['QUERY PLAN']).join('\n');
// end snippet
assert.equal(decoded.node_id, NODE_ID);
assert.ok(decoded.seq >= 0 && decoded.seq < 4096, decoded.seq);
assert.equal(decoded.ts.getTime(), decoded.ts_only.getTime());
assert.ok(Math.abs(decoded.ts.getTime() - Date.now()) < 120_000, decoded.ts);
assert.deepEqual(recent.map((r) => r.id).sort(), [id, ...bulkIds].sort());
assert.ok(plan.includes('orders_pkey') && !plan.includes('Seq Scan'), plan);
say(`4. decoded (node ${decoded.node_id}, seq ${decoded.seq}, ${decoded.ts.toISOString()}); last hour by key: ${plan.split('\n')[0]}`);
await knex.destroy();

// snippet: errors
for (const [url, sqlstate] of [[process.env.NODE_UNSET_URL, 'F0000'],
                               [process.env.NOT_PRELOADED_URL, '55000']]) {
  const other = connect(url);
  await other.migrate.latest();
  const error = await other('orders').insert({ item: 'pear' }).returning('id').then(
    () => assert.fail('the insert worked'), (e) => e);
  assert.equal(error.code, sqlstate, error.message);
  // Knex's message: the statement, " - ", then the server's message.
  assert.ok(error.message.endsWith(` - ${MESSAGES[sqlstate]}`), error.message);
  await other.destroy();
  say(`5. ${error.code}: ${MESSAGES[sqlstate]}`);
}
// end snippet
say('all five points hold');

async function checkBulk(ids) {
  // 5,000 IDs, positive, distinct, increasing, and each the ID of its own row.
  assert.equal(ids.length, 5000);
  assert.ok(ids.every((i) => typeof i === 'string' && /^[1-9][0-9]*$/.test(i)));
  assert.equal(new Set(ids).size, 5000);
  const big = ids.map(BigInt);
  assert.ok(big.every((value, n) => n === 0 || value > big[n - 1]), 'not increasing');
  const found = await knex('orders').select('id', 'item').whereIn('id', ids);
  const items = new Map(found.map((row) => [row.id, row.item]));
  assert.deepEqual(ids.map((i) => items.get(i)), ids.map((_, n) => `bulk ${n}`));
}

async function seedHistory() {
  // 100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE.
  await knex.raw(`INSERT INTO orders (id, item)
    SELECT snowflake_from_timestamp(now() - interval '30 days' + g * interval '10 seconds'), 'old'
      FROM generate_series(0, 99999) g`);
  await knex.raw('ANALYZE orders');
}
