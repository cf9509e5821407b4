// The Knex example's migration (knex.mjs runs it with knex.migrate.latest()).
// snippet: migration
export async function up(knex) {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_snowflake');
  await knex.schema.createTable('orders', (table) => {
    table.bigInteger('id').primary().defaultTo(knex.raw('snowflake_nextval()'));
    table.text('item').notNullable();
  });
}

export async function down(knex) {
  await knex.schema.dropTable('orders');
}
// end snippet
