// pg_snowflake with JDBC (Debian's pgjdbc, libpostgresql-jdbc-java) and Jackson for JSON: the
// recipe of docs/CLIENTS.md#java-jdbc, and its test.
//
// Run by scripts/test/clients (java SnowflakeJdbc.java, with Debian's jars on the class path) against
// servers it starts: DATABASE_URL (preloaded, node id 7), NODE_UNSET_URL (preloaded, no node id)
// and NOT_PRELOADED_URL (installed, not preloaded). A failed check throws: non-zero exit.
import com.fasterxml.jackson.annotation.JsonFormat;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import org.postgresql.util.PSQLException;

public class SnowflakeJdbc {
    static final int NODE_ID = 7; // the test server's pg_snowflake.node_id (scripts/test/clients)
    static final long LARGEST = Long.MAX_VALUE; // the last ID of the layout: 19 digits

    // snippet: migrate
    static void migrate(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE EXTENSION IF NOT EXISTS pg_snowflake");
            st.execute("CREATE TABLE IF NOT EXISTS orders ("
                    + " id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),"
                    + " item text NOT NULL)");
        }
    }

    // postgresql://user@host:port/db (DATABASE_URL) as a JDBC URL; reWriteBatchedInserts makes
    // a batch of INSERTs a few multi-row INSERTs.
    static Connection connect(String url) throws SQLException {
        URI uri = URI.create(url);
        return DriverManager.getConnection("jdbc:postgresql://" + uri.getHost() + ":" + uri.getPort()
                + uri.getPath() + "?user=" + uri.getUserInfo() + "&reWriteBatchedInserts=true");
    }
    // end snippet

    // snippet: json
    // The JSON an API sends: the ID as a string, which every client reads exactly (a JavaScript
    // Number cannot hold it), and which Debian 12's Jackson 2.14 reads back into a long (it
    // refuses 19-digit JSON *numbers* for a long field: "out of range of long").
    record OrderJson(@JsonFormat(shape = JsonFormat.Shape.STRING) long id, String item) {}
    // end snippet

    // The same without the string shape: the ID as a JSON number.
    record OrderNumber(long id, String item) {}

    public static void main(String[] args) throws Exception {
        try (Connection conn = connect(System.getenv("DATABASE_URL"))) {
            migrate(conn);
            say("1. table declared with DEFAULT snowflake_nextval()");

            // snippet: insert
            long id;
            try (PreparedStatement ps = conn.prepareStatement(
                    "INSERT INTO orders (item) VALUES (?)", new String[] {"id"})) {
                ps.setString(1, "apple");
                ps.executeUpdate();
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    keys.next();
                    id = keys.getLong("id");
                }
            }

            List<Long> bulkIds = new ArrayList<>();
            try (PreparedStatement ps = conn.prepareStatement(
                    "INSERT INTO orders (item) VALUES (?)", new String[] {"id"})) {
                for (int i = 0; i < 5000; i++) {
                    ps.setString(1, "bulk " + i);
                    ps.addBatch();
                }
                ps.executeBatch();
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    while (keys.next()) {
                        bulkIds.add(keys.getLong("id")); // in the order of the batch
                    }
                }
            }
            // end snippet
            check(id > 0, "positive id " + id);
            checkBulk(conn, bulkIds);
            say("2. single insert returned " + id + "; 5,000 batched IDs returned in order");

            // snippet: round-trip
            String end = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')";
            long largest;
            try (Statement st = conn.createStatement();
                    ResultSet rs = st.executeQuery("SELECT " + end)) {
                rs.next();
                largest = rs.getLong(1);
            }
            ObjectMapper json = new ObjectMapper();
            String text = json.writeValueAsString(new OrderJson(largest, "far"));
            long back = json.readValue(text, OrderJson.class).id();
            boolean same;
            try (PreparedStatement ps = conn.prepareStatement("SELECT ? = " + end)) {
                ps.setLong(1, back);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    same = rs.getBoolean(1);
                }
            }
            // end snippet
            check(largest == LARGEST && Long.toString(largest).length() == 19, "largest " + largest);
            check(text.equals("{\"id\":\"9223372036854775807\",\"item\":\"far\"}"), text);
            // As a JSON number, the ID is written with all its digits; reading it back either
            // gives the same long or fails (Debian 12's Jackson): never another number.
            String number = json.writeValueAsString(new OrderNumber(largest, "far"));
            check(number.equals("{\"id\":9223372036854775807,\"item\":\"far\"}"), number);
            try {
                long read = json.readValue(number, OrderNumber.class).id();
                check(read == LARGEST, "a JSON number read back as " + read);
            } catch (JsonMappingException e) {
                check(e.getMessage().contains("out of range of long"), e.getMessage());
            }
            check(back == LARGEST && same, "back " + back + " same " + same);
            long again = json.readValue(json.writeValueAsString(new OrderJson(id, "apple")),
                    OrderJson.class).id();
            check(again == id && itemOf(conn, again).equals("apple"), "apple by id " + again);
            say("3. 19 digits through the driver (long) and Jackson, both ways");

            seedHistory(conn); // 100,000 older rows: the table of an application that has run a while

            // snippet: decode
            OffsetDateTime ts, tsOnly;
            int node, seq;
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT d.ts, d.node_id, d.seq, snowflake_timestamp(o.id)"
                    + " FROM orders o, snowflake_decode(o.id) d WHERE o.id = ?")) {
                ps.setLong(1, id);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    ts = rs.getObject(1, OffsetDateTime.class);
                    node = rs.getInt(2);
                    seq = rs.getInt(3);
                    tsOnly = rs.getObject(4, OffsetDateTime.class);
                }
            }

            String lastHour = "SELECT id FROM orders"
                    + " WHERE id >= snowflake_from_timestamp(now() - interval '1 hour')";
            List<Long> recent = new ArrayList<>();
            StringBuilder plan = new StringBuilder();
            try (Statement st = conn.createStatement()) {
                try (ResultSet rs = st.executeQuery(lastHour)) {
                    while (rs.next()) recent.add(rs.getLong(1));
                }
                try (ResultSet rs = st.executeQuery("EXPLAIN " + lastHour)) {
                    while (rs.next()) plan.append(rs.getString(1)).append('\n');
                }
            }
            // end snippet
            check(node == NODE_ID, "node " + node);
            check(seq >= 0 && seq < 4096, "seq " + seq);
            check(ts.equals(tsOnly), ts + " vs " + tsOnly);
            check(Duration.between(ts.toInstant(), Instant.now()).abs().getSeconds() < 120, "ts " + ts);
            List<Long> mine = new ArrayList<>(bulkIds);
            mine.add(id);
            check(new HashSet<>(recent).equals(new HashSet<>(mine)) && recent.size() == mine.size(),
                    "last hour: " + recent.size() + " rows");
            check(plan.indexOf("orders_pkey") >= 0 && plan.indexOf("Seq Scan") < 0, plan.toString());
            say("4. decoded (node " + node + ", seq " + seq + ", " + ts + "); last hour by key: "
                    + plan.toString().lines().findFirst().orElse(""));
        }

        // snippet: errors
        String[][] cases = {
            {"NODE_UNSET_URL", "F0000", "pg_snowflake.node_id is not set"},
            {"NOT_PRELOADED_URL", "55000", "pg_snowflake must be loaded via shared_preload_libraries"},
        };
        for (String[] c : cases) {
            try (Connection other = connect(System.getenv(c[0]))) {
                migrate(other);
                SQLException error = null;
                try (Statement st = other.createStatement()) {
                    st.executeUpdate("INSERT INTO orders (item) VALUES ('pear')");
                } catch (SQLException e) {
                    error = e;
                }
                check(error != null && c[1].equals(error.getSQLState()), "SQLSTATE of " + error);
                String message = ((PSQLException) error).getServerErrorMessage().getMessage();
                check(c[2].equals(message), message);
                say("5. " + error.getSQLState() + ": " + message);
            }
        }
        // end snippet
        say("all five points hold");
    }

    // 5,000 IDs, positive, distinct, increasing, and each the ID of its own row.
    static void checkBulk(Connection conn, List<Long> ids) throws SQLException {
        check(ids.size() == 5000, "5000 ids: " + ids.size());
        check(new HashSet<>(ids).size() == 5000, "distinct");
        for (int i = 0; i < ids.size(); i++) {
            check(ids.get(i) > 0 && (i == 0 || ids.get(i) > ids.get(i - 1)), "increasing at " + i);
        }
        Map<Long, String> items = new HashMap<>();
        try (PreparedStatement ps = conn.prepareStatement("SELECT id, item FROM orders WHERE id = ANY(?)")) {
            ps.setArray(1, conn.createArrayOf("bigint", ids.toArray()));
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) items.put(rs.getLong(1), rs.getString(2));
            }
        }
        for (int i = 0; i < ids.size(); i++) {
            check(("bulk " + i).equals(items.get(ids.get(i))), "row of id " + ids.get(i));
        }
    }

    static String itemOf(Connection conn, long id) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement("SELECT item FROM orders WHERE id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "";
            }
        }
    }

    // 100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE.
    static void seedHistory(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("INSERT INTO orders (id, item) SELECT snowflake_from_timestamp(now()"
                    + " - interval '30 days' + g * interval '10 seconds'), 'old'"
                    + " FROM generate_series(0, 99999) g");
            st.execute("ANALYZE orders");
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void say(String words) {
        System.out.println("java: " + words);
    }
}
