// A later migration: ALTER TABLE … ADD COLUMN of a serial (increments without a primary key).
export async function up(knex) {
  await knex.schema.alterTable('orders', (table) => {
    table.increments('number', { primaryKey: false });
  });
}

export async function down(knex) {
  await knex.schema.alterTable('orders', (table) => {
    table.dropColumn('number');
  });
}
