// A first migration as Knex users write it: serial (increments) and bigserial (bigIncrements)
// keys. The foreign key is bigint: an integer one could not hold the IDs the keys get.
export async function up(knex) {
  await knex.schema.createTable('customers', (table) => {
    table.increments('id');
    table.text('name').notNullable();
  });
  await knex.schema.createTable('orders', (table) => {
    table.bigIncrements('id');
    table.bigInteger('customer_id').notNullable().references('customers.id');
    table.text('item').notNullable();
  });
}

export async function down(knex) {
  await knex.schema.dropTable('orders');
  await knex.schema.dropTable('customers');
}
