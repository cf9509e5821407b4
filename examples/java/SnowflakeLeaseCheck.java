// The test of SnowflakeLease.java against real servers, driven by pgrx-tests/tests/app_leases.rs
// (compiled with it by javac; Debian's PostgreSQL JDBC driver on the class path).
//
//   java SnowflakeLeaseCheck CONNINFO LABEL make N   N IDs, printed one a line, then released
//   java SnowflakeLeaseCheck CONNINFO LABEL hold     IDs every few ms until killed; an error line
//                                                    ("error: Class: text") per failure
//   java SnowflakeLeaseCheck CONNINFO LABEL clock    the clock stepped back and ahead
//   java SnowflakeLeaseCheck CONNINFO - bench SECS   bench/lease-clients: acquire to first ID,
//                                                    IDs per second, a plain synchronized counter
//                                                    beside (the ceiling: Maven is out of reach)
//   java SnowflakeLeaseCheck CONNINFO - idle SECS    a lease held SECS seconds, no ID made
//
// Every line is "lease NODE CEILING LEASE_MS", "id ID", "key ID" (the recipe's, under a lease of
// its own), "error: ..." or "done"; a failed check exits non-zero.

import java.sql.SQLException;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

public final class SnowflakeLeaseCheck {
    // snippet: lease
    // Kafka keys for orders, made in this process under a node id leased from the fleet.
    static Map<Long, String> keyed(String url, Properties props, List<String> orders)
            throws SQLException {
        try (var ids = new SnowflakeLease(url, props, "orders-producer")) {
            var keys = new HashMap<Long, String>();
            for (String order : orders) keys.put(ids.next(), order); // LeaseLost: a new lease
            return keys;
        }
    }
    // end snippet

    /** The system clock, stepped by the clock mode. */
    static final class SteppedClock extends Clock {
        final AtomicLong offsetMs = new AtomicLong();
        @Override public ZoneId getZone() { return ZoneOffset.UTC; }
        @Override public Clock withZone(ZoneId zone) { throw new UnsupportedOperationException(); }
        @Override public long millis() { return System.currentTimeMillis() + offsetMs.get(); }
        @Override public Instant instant() { return Instant.ofEpochMilli(millis()); }
    }

    static void say(String text) { System.out.println(text); }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void sayError(SnowflakeLease.LeaseException e) {
        say("error: " + e.getClass().getSimpleName() + ": " + e.getMessage());
    }

    static void increasing(List<Long> ids) {
        for (int i = 1; i < ids.size(); i++) {
            check(ids.get(i) > ids.get(i - 1), "an ID went backwards: " + ids.get(i));
        }
    }

    static void clock(SnowflakeLease lease, SteppedClock clock) {
        var ids = new ArrayList<Long>(List.of(lease.next()));
        // Back by a second: held until the clock passes the last ID, never backwards.
        clock.offsetMs.set(-1_000);
        long started = System.nanoTime();
        for (int i = 0; i < 5_000; i++) ids.add(lease.next());
        double held = (System.nanoTime() - started) / 1e9;
        check(held >= 0.9, "held " + held + " s for a step back of 1 s");
        say(String.format("held %.2f s", held));
        // Back by an hour: the last ID's sequence is used up, then the wait would outlast the lease.
        clock.offsetMs.set(-3_600_000);
        try {
            for (int i = 0; i <= 1 << lease.layout.sequenceBits(); i++) ids.add(lease.next());
            throw new AssertionError("an ID an hour behind");
        } catch (SnowflakeLease.ClockBehind e) {
            sayError(e);
        }
        // Ahead by an hour: past the ceiling.
        clock.offsetMs.set(3_600_000);
        try {
            lease.next();
            throw new AssertionError("an ID an hour ahead");
        } catch (SnowflakeLease.CeilingReached e) {
            sayError(e);
        }
        clock.offsetMs.set(0);
        ids.add(lease.next());
        increasing(ids);
        for (long id : ids) say("id " + id);
    }

    /** IDs per second of one thread calling next for secs seconds. */
    static double rate(java.util.function.LongSupplier next, double secs) {
        long start = System.nanoTime(), end = start + (long) (secs * 1e9), sink = 0;
        for (long n = 1000; ; n += 1000) {
            for (int i = 0; i < 1000; i++) sink ^= next.getAsLong();
            if (System.nanoTime() >= end) {
                check(sink != 42, "");
                return n / ((System.nanoTime() - start) / 1e9);
            }
        }
    }

    static long counter;

    static synchronized long count() { return ++counter; }

    static void bench(String url, Properties props, String mode, double secs) throws Exception {
        long started = System.nanoTime();
        try (var lease = new SnowflakeLease(url, props, mode)) {
            if (mode.equals("idle")) {
                Thread.sleep((long) (secs * 1000));
                return;
            }
            lease.next();
            say(String.format("first_id_ms %.1f", (System.nanoTime() - started) / 1e6));
            say(String.format("lease_ids_per_s %.0f", rate(lease::next, secs)));
        }
        say(String.format("other counter %.0f", rate(SnowflakeLeaseCheck::count, secs)));
    }

    public static void main(String[] args) throws Exception {
        String label = args[1], mode = args[2];
        // A libpq keyword string, as the Rust test passes it, made a JDBC URL.
        var conninfo = new HashMap<String, String>();
        for (String pair : args[0].split(" ")) {
            String[] kv = pair.split("=", 2);
            conninfo.put(kv[0], kv[1]);
        }
        String url = "jdbc:postgresql://" + conninfo.get("host") + ":" + conninfo.get("port") + "/"
                + conninfo.get("dbname");
        var props = new Properties();
        props.setProperty("user", conninfo.get("user"));
        if (mode.equals("bench") || mode.equals("idle")) {
            bench(url, props, mode, Double.parseDouble(args[3]));
            System.exit(0);
        }
        if (mode.equals("make")) {
            var keys = keyed(url, props, List.of("apple", "pear"));
            check(keys.size() == 2, "keys " + keys);
            for (long key : keys.keySet()) say("key " + key);
        }
        var clock = new SteppedClock();
        try (var lease = new SnowflakeLease(url, props, label, clock)) {
            say("lease " + lease.nodeId + " " + lease.ceilingMs() + " " + lease.leaseMs);
            switch (mode) {
                case "make" -> {
                    var ids = new ArrayList<Long>();
                    for (int i = Integer.parseInt(args[3]); i > 0; i--) ids.add(lease.next());
                    increasing(ids);
                    var out = new StringBuilder();
                    for (long id : ids) out.append("id ").append(id).append('\n');
                    System.out.print(out);
                }
                case "hold" -> {
                    while (true) {
                        try {
                            say("id " + lease.next());
                        } catch (SnowflakeLease.LeaseException e) {
                            sayError(e);
                        }
                        Thread.sleep(2);
                    }
                }
                case "clock" -> clock(lease, clock);
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
        say("done");
        System.exit(0);
    }
}
