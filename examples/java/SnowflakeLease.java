// pg_snowflake IDs made in a Java process, under a node id leased from the fleet's registry.
//
// A process that makes its own IDs (Kafka keys, outbox rows, client-side batches) takes a node id
// from the registry the fleet's servers use, through any member server (docs/FLEETS.md,
// "Applications"), so that no two processes, and no server, ever stamp IDs under one node id:
//
//   try (var ids = new SnowflakeLease("jdbc:postgresql://db-1/app", props, "orders-producer")) {
//       long key = ids.next();
//   }
//
// The lease is taken by the constructor (its token lives in this process only), renewed by a
// scheduled thread three times a lease, and released by close(). IDs are made in process with the
// fleet's layout as the lease reports it. No ID is ever stamped above the ceiling the registry
// granted, nor at or below the floor it resumed from; after a clock step back next() waits until
// the clock passes its last ID, and throws ClockBehind when that wait would outlast the lease.
// Once the registry says the lease is lost, every call throws LeaseLost: take a new lease.
//
// Needs the PostgreSQL JDBC driver, and a role that is a member of snowflake_lease on the member
// server. Java 17.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Clock;
import java.util.Properties;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/** A node-id lease and the ID generator under it. Thread-safe. */
public final class SnowflakeLease implements AutoCloseable {
    /** No ID can be made under the lease now (unchecked: next() is called where IDs are used). */
    public static class LeaseException extends RuntimeException {
        LeaseException(String message) { super(message); }
    }
    /** The registry no longer holds this lease (it ran out and was retired, or was released). */
    public static final class LeaseLost extends LeaseException {
        LeaseLost(String message) { super(message); }
    }
    /** No renewal succeeded for a whole lease; IDs resume at the next renewal. */
    public static final class LeaseExpired extends LeaseException {
        LeaseExpired(String message) { super(message); }
    }
    /** The next ID would be stamped past the ceiling the registry granted. */
    public static final class CeilingReached extends LeaseException {
        CeilingReached(String message) { super(message); }
    }
    /** The clock stepped back further than the lease lets this process wait for it. */
    public static final class ClockBehind extends LeaseException {
        ClockBehind(String message) { super(message); }
    }

    /** How the fleet splits an ID: time | node | sequence, time in unitMs since epochMs. */
    public record Layout(long epochMs, long unitMs, int timeBits, int nodeBits, int sequenceBits) {}

    public final int nodeId;
    public final long leaseMs;
    public final Layout layout;

    private final String url;
    private final Properties props;
    private final Clock clock;
    private final String token;
    private final long generation;
    private final long maxTick, maxSeq;
    private final ScheduledThreadPoolExecutor heartbeat;
    private Connection conn; // the constructor's, then the heartbeat's, then close()'s

    // Guarded by this.
    private long ceiling;
    private boolean markOwn = true; // the registry's mark is the one our lease wrote
    private long leaseEndsNanos; // System.nanoTime(): never after the registry's end
    private LeaseException lost;
    private long tick, seq; // the last stamp

    /** Takes a lease through the member server at {@code url}, IDs stamped from the system clock. */
    public SnowflakeLease(String url, Properties props, String label) throws SQLException {
        this(url, props, label, Clock.systemUTC());
    }

    /**
     * Takes a lease; IDs are stamped from {@code clock}. The lease's own end is timed on
     * System.nanoTime(), which no step of the wall clock moves.
     */
    public SnowflakeLease(String url, Properties props, String label, Clock clock)
            throws SQLException {
        this.url = url;
        this.clock = clock;
        // A member that never answers must not hang the renewals for good (the caller's win).
        this.props = new Properties();
        this.props.setProperty("connectTimeout", "10");
        this.props.setProperty("socketTimeout", "10");
        this.props.putAll(props);
        long sent = System.nanoTime();
        try (PreparedStatement st = connection().prepareStatement(
                "SELECT node_id, token, generation, floor_ms, ceiling_ms, lease_ms, epoch_ms,"
                + " unit_ms, time_bits, node_bits, sequence_bits FROM snowflake_lease_acquire(?)")) {
            st.setString(1, label);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                nodeId = rs.getInt(1);
                token = rs.getString(2);
                generation = rs.getLong(3);
                long floor = rs.getLong(4);
                boolean noFloor = rs.wasNull();
                ceiling = rs.getLong(5);
                leaseMs = rs.getLong(6);
                layout = new Layout(rs.getLong(7), rs.getLong(8), rs.getInt(9), rs.getInt(10),
                        rs.getInt(11));
                maxSeq = (1L << layout.sequenceBits()) - 1;
                maxTick = (1L << layout.timeBits()) - 1;
                // The floor counts as our last stamp, its sequence used up: the first ID lies above.
                tick = noFloor ? -1 : tickOf(floor);
                seq = maxSeq;
            }
        } catch (SQLException | RuntimeException e) {
            dropConnection();
            throw e;
        }
        leaseEndsNanos = sent + TimeUnit.MILLISECONDS.toNanos(leaseMs);
        heartbeat = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "snowflake-lease-" + label);
            t.setDaemon(true);
            return t;
        });
        heartbeat.setExecuteExistingDelayedTasksAfterShutdownPolicy(false); // close() ends them
        heartbeat.schedule(this::beat, interval(), TimeUnit.MILLISECONDS);
    }

    /** The next ID: greater than every ID this lease made before, unique across the fleet. */
    public synchronized long next() {
        while (true) {
            usable();
            long nowMs = clock.millis();
            long t = tickOf(nowMs), s = 0;
            if (t <= tick) {
                if (seq >= maxSeq) {
                    hold(nowMs);
                    continue;
                }
                t = tick; // the clock at or behind our last stamp
                s = seq + 1;
            }
            if (t > maxTick) throw new CeilingReached("the layout's time field is used up");
            long stampMs = layout.epochMs() + t * layout.unitMs();
            if (stampMs > ceiling) {
                throw new CeilingReached("node id " + nodeId + ": the next ID would be stamped at "
                        + stampMs + " ms, past the lease's ceiling " + ceiling + " ms");
            }
            tick = t;
            seq = s;
            return (t << (layout.nodeBits() + layout.sequenceBits()))
                    | ((long) nodeId << layout.sequenceBits()) | s;
        }
    }

    /** The latest time (Unix ms) an ID of this lease may be stamped at, for now. */
    public synchronized long ceilingMs() { return ceiling; }

    private long tickOf(long unixMs) {
        return Math.floorDiv(unixMs - layout.epochMs(), layout.unitMs());
    }

    /** Waits (the lock released: renewals go on) until the clock passes our last stamp. */
    private void hold(long nowMs) {
        long waitMs = layout.epochMs() + (tick + 1) * layout.unitMs() - nowMs;
        if (waitMs > TimeUnit.NANOSECONDS.toMillis(leaseEndsNanos - System.nanoTime())) {
            throw new ClockBehind("node id " + nodeId + ": the clock is " + waitMs
                    + " ms behind the last ID, longer than the lease lets this process wait");
        }
        try {
            if (waitMs > 0) wait(waitMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LeaseException("interrupted while the clock caught up with the last ID");
        }
    }

    private void usable() {
        if (lost != null) throw lost;
        long leftMs = TimeUnit.NANOSECONDS.toMillis(leaseEndsNanos - System.nanoTime());
        if (leftMs <= 0) {
            throw new LeaseExpired("node id " + nodeId + ": no renewal for " + (leaseMs - leftMs)
                    + " ms");
        }
    }

    private long interval() { return Math.max(leaseMs / 3, 100); }

    private Connection connection() throws SQLException {
        if (conn == null) conn = DriverManager.getConnection(url, props);
        return conn;
    }

    private void dropConnection() {
        try {
            if (conn != null) conn.close();
        } catch (SQLException ignored) {
            // closing a broken connection: nothing to do
        }
        conn = null;
    }

    private void beat() {
        long pause = interval();
        try {
            renew();
        } catch (LeaseLost e) {
            return;
        } catch (SQLException e) {
            // Out of reach: the lease runs on until its end; try again within a second.
            dropConnection();
            pause = Math.min(pause, 1000);
        }
        try {
            heartbeat.schedule(this::beat, pause, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException closed) {
            // close() came first
        }
    }

    /** Extends the lease (the heartbeat calls this); throws LeaseLost if it is gone. */
    private void renew() throws SQLException {
        long had;
        synchronized (this) { had = ceiling; }
        long sent = System.nanoTime();
        try (PreparedStatement st = connection().prepareStatement(
                "SELECT ceiling_ms, mark_own FROM snowflake_lease_renew(?, ?, ?, ?)")) {
            st.setInt(1, nodeId);
            st.setString(2, token);
            st.setLong(3, generation);
            st.setLong(4, had);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                synchronized (this) {
                    ceiling = Math.max(ceiling, rs.getLong(1));
                    markOwn = markOwn && rs.getBoolean(2);
                    leaseEndsNanos = Math.max(leaseEndsNanos,
                            sent + TimeUnit.MILLISECONDS.toNanos(leaseMs));
                }
            }
        } catch (SQLException e) {
            String message = e.getMessage() == null ? "" : e.getMessage();
            if (!"55000".equals(e.getSQLState()) || !message.contains(" is lost")) throw e;
            synchronized (this) {
                lost = new LeaseLost(message.lines().findFirst().orElse(message));
                throw lost;
            }
        }
    }

    /** Stops the renewals and releases the lease; no ID is made under it afterwards. */
    @Override
    public void close() throws SQLException {
        boolean gone;
        Long lowerCeiling = null, lastMs = null;
        synchronized (this) {
            if (heartbeat.isShutdown()) return;
            heartbeat.shutdown();
            gone = lost != null;
            lost = new LeaseLost("node id " + nodeId + ": the lease was released");
            if (markOwn) { // lowered to our last ID only while the mark is our lease's
                lowerCeiling = ceiling;
                lastMs = layout.epochMs() + Math.max(tick, 0) * layout.unitMs();
            }
        }
        try {
            heartbeat.awaitTermination(30, TimeUnit.SECONDS);
            if (gone) return;
            try (PreparedStatement st = connection().prepareStatement(
                    "SELECT snowflake_lease_release(?, ?, ?, ?, ?)")) {
                st.setInt(1, nodeId);
                st.setString(2, token);
                st.setLong(3, generation);
                st.setObject(4, lowerCeiling, Types.BIGINT);
                st.setObject(5, lastMs, Types.BIGINT);
                st.execute();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            dropConnection();
        }
    }
}
