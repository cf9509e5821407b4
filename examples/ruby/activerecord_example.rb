# pg_snowflake with ActiveRecord (Debian's ruby-activerecord and ruby-pg): the recipe of
# docs/CLIENTS.md#ruby-activerecord, and its test.
#
# Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
# NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
# A failed check raises: non-zero exit.
require "active_record"
require "json"

NODE_ID = 7 # the test server's pg_snowflake.node_id (scripts/test/clients)
LARGEST = 9_223_372_036_854_775_807 # the last ID of the layout: 19 digits, i64::MAX
MIGRATIONS = File.join(__dir__, "db", "migrate")

def say(words)
  puts "ruby: #{words}"
  $stdout.flush
end

def check(ok, what)
  raise "check failed: #{what}" unless ok
end

# snippet: model
class Order < ActiveRecord::Base
end

def connect_and_migrate(url)
  ActiveRecord::Base.establish_connection(url)
  ActiveRecord::MigrationContext.new(MIGRATIONS, ActiveRecord::SchemaMigration).migrate
end
# end snippet

ActiveRecord::Migration.verbose = false
connect_and_migrate(ENV.fetch("DATABASE_URL"))
default = Order.connection.select_value(
  "SELECT column_default FROM information_schema.columns " \
  "WHERE table_name = 'orders' AND column_name = 'id'"
)
check(default == "snowflake_nextval()", "default #{default.inspect}")
say("1. migration made orders.id bigint DEFAULT snowflake_nextval()")

# snippet: insert
order = Order.create!(item: "apple") # INSERT ... RETURNING "id": order.id is set

rows = (0...5000).map { |i| { item: "bulk #{i}" } }
bulk_ids = Order.insert_all!(rows, returning: %w[id]).rows.map(&:first) # one INSERT, in order
# end snippet
check(order.id.is_a?(Integer) && order.id.positive?, "id #{order.id.inspect}")
check(bulk_ids.size == 5000 && bulk_ids.uniq.size == 5000, "5000 distinct ids")
check(bulk_ids.all? { |i| i.is_a?(Integer) && i.positive? }, "positive integers")
check(bulk_ids.each_cons(2).all? { |a, b| a < b }, "increasing")
items = Order.where(id: bulk_ids).pluck(:id, :item).to_h
check(bulk_ids.each_with_index.all? { |id, n| items[id] == "bulk #{n}" }, "each id its own row")
say("2. create! returned #{order.id}; insert_all! 5,000 IDs, in order")

# snippet: round-trip
END_OF_IDS = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')"
largest = Order.connection.select_value("SELECT #{END_OF_IDS}")
text = Order.new(id: largest, item: "far").to_json # {"id":9223372036854775807,"item":"far"}
back = JSON.parse(text)["id"]
same = Order.connection.exec_query(
  "SELECT $1::bigint = #{END_OF_IDS} AS same", "round trip",
  [ActiveRecord::Relation::QueryAttribute.new("id", back, ActiveRecord::Type::BigInteger.new)]
).rows.first.first
# end snippet
check(largest == LARGEST && largest.to_s.size == 19, "largest #{largest.inspect}")
check(text == '{"id":9223372036854775807,"item":"far"}', text)
check(back == LARGEST && same == true, "back #{back.inspect} same #{same.inspect}")
again = JSON.parse(order.to_json)["id"]
check(Order.find(again).item == "apple", "apple by id")
say("3. 19 digits through ActiveRecord and JSON, both ways")

# 100,000 older rows (30 to 18 days ago): the table of an application that has run a while.
Order.connection.execute(<<~SQL)
  INSERT INTO orders (id, item)
  SELECT snowflake_from_timestamp(now() - interval '30 days' + g * interval '10 seconds'), 'old'
    FROM generate_series(0, 99999) g
SQL
Order.connection.execute("ANALYZE orders")

# snippet: decode
decoded = Order.joins(", snowflake_decode(orders.id) d")
               .select("orders.id, d.ts, d.node_id, d.seq, snowflake_timestamp(orders.id) AS ts_only")
               .find(order.id)

last_hour = Order.where("id >= snowflake_from_timestamp(now() - interval '1 hour')")
recent = last_hour.pluck(:id)
plan = last_hour.select(:id).explain
# end snippet
check(decoded.node_id == NODE_ID, "node #{decoded.node_id}")
check((0...4096).cover?(decoded.seq), "seq #{decoded.seq}")
check(decoded.ts.is_a?(Time) && decoded.ts == decoded.ts_only, "#{decoded.ts} #{decoded.ts_only}")
check((decoded.ts - Time.now).abs < 120, "ts #{decoded.ts}")
check(recent.sort == ([order.id] + bulk_ids).sort, "last hour: #{recent.size} rows")
check(plan.include?("orders_pkey") && !plan.include?("Seq Scan"), plan)
first = plan.lines.find { |l| l.include?("Scan") }.strip
say("4. decoded (node #{decoded.node_id}, seq #{decoded.seq}, #{decoded.ts.utc}); last hour by key: #{first}")

# snippet: errors
{
  "NODE_UNSET_URL" => ["F0000", "pg_snowflake.node_id is not set"],
  "NOT_PRELOADED_URL" => ["55000", "pg_snowflake must be loaded via shared_preload_libraries"],
}.each do |variable, (sqlstate, message)|
  connect_and_migrate(ENV.fetch(variable))
  error = begin
    Order.create!(item: "pear")
    nil
  rescue ActiveRecord::StatementInvalid => e
    e
  end
  check(error&.cause&.result&.error_field(PG::PG_DIAG_SQLSTATE) == sqlstate, error.inspect)
  check(error.cause.result.error_field(PG::PG_DIAG_MESSAGE_PRIMARY) == message, error.message)
  say("5. #{sqlstate}: #{message} (#{error.class})")
end
# end snippet
say("all five points hold")
