# The ActiveRecord example's migration (activerecord_example.rb runs it).
# snippet: migration
class CreateOrders < ActiveRecord::Migration[6.1]
  def change
    enable_extension "pg_snowflake"
    create_table :orders, id: :bigint, default: -> { "snowflake_nextval()" } do |t|
      t.text :item, null: false
    end
  end
end
# end snippet
