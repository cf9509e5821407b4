// The knexfile of the adopt_new_keys example: one database, from DATABASE_URL. Its migrations
// are plain Knex (increments, bigIncrements), nothing of pg_snowflake in them; with
// pg_snowflake.adopt_new_keys on, `knex migrate:latest` puts every key on snowflake_nextval().
export default {
  client: 'pg',
  connection: process.env.DATABASE_URL,
  migrations: {
    directory: './migrations',
    loadExtensions: ['.mjs'],
  },
};
