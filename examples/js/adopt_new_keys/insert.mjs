// Inserts through Knex after `knex migrate:latest`, and prints the ids Knex read back, one JSON
// object: run by pgrx-tests/tests/adopt_new_keys_orms.rs, which checks them in the server.
import knexFactory from 'knex';
import config from './knexfile.mjs';

const knex = knexFactory(config);
const [{ id: customer }] = await knex('customers').insert({ name: 'Ada' }).returning('id');
const [order] = await knex('orders').insert({ customer_id: customer, item: 'apple' })
  .returning(['id', 'number']);
const bulk = await knex('orders')
  .insert([0, 1, 2].map((i) => ({ customer_id: customer, item: `bulk ${i}` })))
  .returning('id');
console.log(JSON.stringify({
  customer, order: order.id, number: order.number, bulk: bulk.map((row) => row.id),
}));
await knex.destroy();
