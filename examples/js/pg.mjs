// pg_snowflake with node-postgres (pg): the recipe of docs/CLIENTS.md#node-postgres, and its test.
//
// Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
// NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
// Every check is an assert; a failed one exits non-zero.
import assert from 'node:assert/strict';
import pg from 'pg';

const NODE_ID = 7; // the test server's pg_snowflake.node_id (scripts/test/clients)
const LARGEST = '9223372036854775807'; // the last ID of the layout: 19 digits, i64::MAX
const MESSAGES = { // the errors of point 5, as the server words them
  F0000: 'pg_snowflake.node_id is not set',
  55000: 'pg_snowflake must be loaded via shared_preload_libraries',
};
const say = (words) => console.log(`node-pg: ${words}`);

// snippet: migrate
async function migrate(pool) {
  await pool.query('CREATE EXTENSION IF NOT EXISTS pg_snowflake');
  await pool.query(`CREATE TABLE IF NOT EXISTS orders (
                      id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                      item text NOT NULL)`);
}
// end snippet

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await migrate(pool);
say('1. table declared with DEFAULT snowflake_nextval()');

// snippet: insert
// node-postgres returns bigint (int8) columns as strings: every digit kept.
const { rows: [{ id }] } = await pool.query(
  'INSERT INTO orders (item) VALUES ($1) RETURNING id', ['apple']);

const items = Array.from({ length: 5000 }, (_, i) => `bulk ${i}`);
const { rows: bulk } = await pool.query(
  'INSERT INTO orders (item) SELECT unnest($1::text[]) RETURNING id', [items]);
const bulkIds = bulk.map((row) => row.id); // strings, in the order of items
// end snippet
assert.equal(typeof id, 'string');
assert.match(id, /^[1-9][0-9]{17,18}$/);
await checkBulk(bulkIds);
say(`2. single insert returned '${id}'; 5,000 bulk IDs returned in order`);

// snippet: round-trip
const END = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')";
const { rows: [{ largest }] } = await pool.query(`SELECT ${END} AS largest`);
const json = JSON.stringify({ id: largest }); // '{"id":"9223372036854775807"}'
const back = JSON.parse(json).id; // still the string
const { rows: [{ same }] } = await pool.query(`SELECT $1::bigint = ${END} AS same`, [back]);

// Where arithmetic is needed: BigInt, asked for per query; JSON.stringify refuses a BigInt
// unless told to write it as a string.
const asBigInt = { getTypeParser: (oid, format) =>
  oid === pg.types.builtins.INT8 ? BigInt : pg.types.getTypeParser(oid, format) };
const { rows: [{ big }] } = await pool.query({ text: `SELECT ${END} AS big`, types: asBigInt });
const bigJson = JSON.stringify({ id: big }, (key, value) =>
  typeof value === 'bigint' ? value.toString() : value);
// end snippet
assert.equal(largest, LARGEST); // a string of 19 digits
assert.equal(json, '{"id":"9223372036854775807"}');
assert.equal(back, LARGEST);
assert.equal(same, true);
assert.equal(typeof big, 'bigint');
assert.equal(big, 9223372036854775807n);
assert.equal(bigJson, '{"id":"9223372036854775807"}');
assert.throws(() => JSON.stringify({ id: big }), TypeError);
// The lossy path is not taken: as a Number the ID would be another one.
assert.notEqual(String(Number(largest)), LARGEST);
assert.notEqual(String(JSON.parse('{"id": 9223372036854775807}').id), LARGEST);
const { rows: [{ bigSame }] } = await pool.query(
  `SELECT $1::bigint = ${END} AS "bigSame"`, [big]);
assert.equal(bigSame, true);
const { rows: [{ item }] } = await pool.query('SELECT item FROM orders WHERE id = $1',
  [JSON.parse(JSON.stringify({ id })).id]);
assert.equal(item, 'apple');
say('3. 19 digits as strings (and BigInt) through the driver and JSON, never a Number');

await seedHistory(); // 100,000 older rows: the table of an application that has run a while

// snippet: decode
const { rows: [decoded] } = await pool.query(
  `SELECT d.ts, d.node_id, d.seq, snowflake_timestamp(o.id) AS ts_only
     FROM orders o, snowflake_decode(o.id) d WHERE o.id = $1`, [id]);

const lastHour = `SELECT id FROM orders
                   WHERE id >= snowflake_from_timestamp(now() - interval '1 hour')`;
const { rows: recent } = await pool.query(lastHour);
const { rows: planRows } = await pool.query(`EXPLAIN ${lastHour}`);
const plan = planRows.map((row) => row['QUERY PLAN']).join('\n');
// end snippet
assert.equal(decoded.node_id, NODE_ID);
assert.ok(decoded.seq >= 0 && decoded.seq < 4096, decoded.seq);
assert.ok(decoded.ts instanceof Date);
assert.equal(decoded.ts.getTime(), decoded.ts_only.getTime());
assert.ok(Math.abs(decoded.ts.getTime() - Date.now()) < 120_000, decoded.ts);
assert.deepEqual(recent.map((r) => r.id).sort(), [id, ...bulkIds].sort());
assert.ok(plan.includes('orders_pkey') && !plan.includes('Seq Scan'), plan);
say(`4. decoded (node ${decoded.node_id}, seq ${decoded.seq}, ${decoded.ts.toISOString()}); last hour by key: ${plan.split('\n')[0]}`);
await pool.end();

// snippet: errors
for (const [url, sqlstate] of [[process.env.NODE_UNSET_URL, 'F0000'],
                               [process.env.NOT_PRELOADED_URL, '55000']]) {
  const other = new pg.Pool({ connectionString: url });
  await migrate(other);
  const error = await other.query("INSERT INTO orders (item) VALUES ('pear')").then(
    () => assert.fail('the insert worked'), (e) => e);
  assert.equal(error.code, sqlstate, error.message);
  assert.equal(error.message, MESSAGES[sqlstate]);
  await other.end();
  say(`5. ${error.code}: ${error.message}`);
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
  const { rows } = await pool.query('SELECT id, item FROM orders WHERE id = ANY($1::bigint[])', [ids]);
  const items = new Map(rows.map((row) => [row.id, row.item]));
  assert.deepEqual(ids.map((i) => items.get(i)), ids.map((_, n) => `bulk ${n}`));
}

async function seedHistory() {
  // 100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE.
  await pool.query(`INSERT INTO orders (id, item)
    SELECT snowflake_from_timestamp(now() - interval '30 days' + g * interval '10 seconds'), 'old'
      FROM generate_series(0, 99999) g`);
  await pool.query('ANALYZE orders');
}
