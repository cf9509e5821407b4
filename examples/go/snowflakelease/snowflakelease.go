// Package snowflakelease makes pg_snowflake IDs (Kafka keys, outbox rows, client-side batches) in
// a Go process, under a node id leased from the registry the fleet's servers use, through any
// member server (docs/FLEETS.md, "Applications"): no two processes, and no server, ever stamp IDs
// under one node id.
//
//	ids, err := snowflakelease.Acquire(ctx, "postgres://orders@db-1/app", "orders-producer",
//		snowflakelease.Options{})
//	if err != nil { ... }
//	defer ids.Close(ctx)
//	key, err := ids.Next()
//
// The lease is taken on start (its token lives in this process only), renewed by a goroutine
// three times a lease, and released by Close. IDs are made in process with the fleet's layout as
// the lease reports it. No ID is ever stamped above the ceiling the registry granted, nor at or
// below the floor it resumed from; after a clock step back Next waits until the clock passes its
// last ID, and fails with ErrClockBehind when that wait would outlast the lease. Once the registry
// says the lease is lost, every call fails with ErrLeaseLost: take a new lease.
//
// Needs pgx v4, and a role that is a member of snowflake_lease on the member server.
package snowflakelease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// The errors of Next, to test with errors.Is: no ID can be made under the lease now, because
//   - ErrLeaseLost: the registry no longer holds it (it ran out and was retired, or was released);
//   - ErrLeaseExpired: no renewal succeeded for a whole lease (IDs resume at the next renewal);
//   - ErrCeilingReached: the next ID would be stamped past the ceiling the registry granted;
//   - ErrClockBehind: the clock stepped back further than the lease lets this process wait.
var (
	ErrLeaseLost      = errors.New("snowflakelease: lease lost")
	ErrLeaseExpired   = errors.New("snowflakelease: lease expired")
	ErrCeilingReached = errors.New("snowflakelease: ceiling reached")
	ErrClockBehind    = errors.New("snowflakelease: clock behind")
)

// Layout is how the fleet splits an ID: time | node | sequence, time in UnitMs since EpochMs.
type Layout struct {
	EpochMs, UnitMs                  int64
	TimeBits, NodeBits, SequenceBits int
}

// Options are the optional settings of Acquire; the zero value means the defaults.
type Options struct {
	// The wall clock IDs are stamped from (time.Now if nil). The lease's own end is timed on
	// Go's monotonic clock, which no step of the wall clock moves.
	Clock func() time.Time
	// Bounds each connection and query (10 s if zero): a member that never answers must not
	// hang the renewals for good.
	Timeout time.Duration
}

// Lease is a node-id lease and the ID generator under it. Safe for concurrent use.
type Lease struct {
	NodeID, LeaseMs int64
	Layout          Layout
	config          *pgx.ConnConfig
	clock           func() time.Time
	timeout         time.Duration
	token           string
	gen             int64
	maxTick, maxSeq int64

	mu        sync.Mutex // guards what follows
	ceiling   int64
	markOwn   bool      // the registry's mark is the one our lease wrote
	leaseEnds time.Time // monotonic: never after the registry's end
	lost      error
	closed    bool
	tick, seq int64 // the last stamp

	conn *pgx.Conn     // the heartbeat's, then Close's: never used by two at once
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the heartbeat ends
}

// Acquire takes a lease through the member server connString names (as pgx.ParseConfig reads it).
// label is how the registry names this application.
func Acquire(ctx context.Context, connString, label string, opts Options) (*Lease, error) {
	config, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	l := &Lease{config: config, clock: time.Now, timeout: 10 * time.Second, markOwn: true,
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.Clock != nil {
		l.clock = opts.Clock
	}
	if opts.Timeout != 0 {
		l.timeout = opts.Timeout
	}
	sent := time.Now()
	var floor *int64
	err = l.query(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT node_id, token, generation, floor_ms, ceiling_ms,
			lease_ms, epoch_ms, unit_ms, time_bits, node_bits, sequence_bits
			FROM snowflake_lease_acquire($1)`, label).Scan(&l.NodeID, &l.token, &l.gen, &floor,
			&l.ceiling, &l.LeaseMs, &l.Layout.EpochMs, &l.Layout.UnitMs, &l.Layout.TimeBits,
			&l.Layout.NodeBits, &l.Layout.SequenceBits)
	})
	if err != nil {
		l.dropConn()
		return nil, err
	}
	l.leaseEnds = sent.Add(time.Duration(l.LeaseMs) * time.Millisecond)
	l.maxSeq, l.maxTick = 1<<l.Layout.SequenceBits-1, 1<<l.Layout.TimeBits-1
	// The floor counts as our last stamp, its sequence used up: the first ID lies above it.
	l.tick, l.seq = -1, l.maxSeq
	if floor != nil {
		l.tick = l.tickOf(*floor)
	}
	go l.heartbeat()
	return l, nil
}

// Next returns the next ID: greater than every ID this lease made before, unique in the fleet.
func (l *Lease) Next() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if err := l.usable(); err != nil {
			return 0, err
		}
		nowMs := l.clock().UnixMilli()
		tick, seq := l.tickOf(nowMs), int64(0)
		if tick <= l.tick {
			if l.seq >= l.maxSeq {
				if err := l.hold(nowMs); err != nil {
					return 0, err
				}
				continue
			}
			tick, seq = l.tick, l.seq+1 // the clock at or behind our last stamp
		}
		if tick > l.maxTick {
			return 0, fmt.Errorf("%w: the layout's time field is used up", ErrCeilingReached)
		}
		if stampMs := l.Layout.EpochMs + tick*l.Layout.UnitMs; stampMs > l.ceiling {
			return 0, fmt.Errorf("%w: node id %d: the next ID would be stamped at %d ms, past the"+
				" lease's ceiling %d ms", ErrCeilingReached, l.NodeID, stampMs, l.ceiling)
		}
		l.tick, l.seq = tick, seq
		return tick<<(l.Layout.NodeBits+l.Layout.SequenceBits) |
			l.NodeID<<l.Layout.SequenceBits | seq, nil
	}
}

// CeilingMs is the latest time (Unix ms) an ID of this lease may be stamped at, for now.
func (l *Lease) CeilingMs() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ceiling
}

func (l *Lease) tickOf(unixMs int64) int64 { // floor division, as the server's
	d, unit := unixMs-l.Layout.EpochMs, l.Layout.UnitMs
	return (d - (d%unit+unit)%unit) / unit
}

// hold waits (unlocked: renewals go on) for the clock to pass our last stamp, if the lease lasts.
func (l *Lease) hold(nowMs int64) error {
	wait := time.Duration(l.Layout.EpochMs+(l.tick+1)*l.Layout.UnitMs-nowMs) * time.Millisecond
	if wait > time.Until(l.leaseEnds) {
		return fmt.Errorf("%w: node id %d: the clock is %v behind the last ID, longer than the"+
			" lease lets this process wait", ErrClockBehind, l.NodeID, wait)
	}
	l.mu.Unlock()
	time.Sleep(wait)
	l.mu.Lock()
	return nil
}

func (l *Lease) usable() error {
	if l.lost != nil {
		return l.lost
	}
	if left := time.Until(l.leaseEnds); left <= 0 {
		return fmt.Errorf("%w: node id %d: no renewal for %d ms", ErrLeaseExpired, l.NodeID,
			l.LeaseMs-left.Milliseconds())
	}
	return nil
}

// query runs f on the lease's connection (made again if dropped), within the timeout.
func (l *Lease) query(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var err error
	if l.conn == nil {
		if l.conn, err = pgx.ConnectConfig(ctx, l.config); err != nil {
			return err
		}
	}
	return f(ctx, l.conn)
}

func (l *Lease) dropConn() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}

func (l *Lease) heartbeat() {
	defer close(l.done)
	interval := time.Duration(l.LeaseMs) * time.Millisecond / 3 // the lease's minimum is 1 s
	pause := interval
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(pause):
		}
		switch err := l.renew(); {
		case err == nil:
			pause = interval
		case errors.Is(err, ErrLeaseLost):
			return
		default: // out of reach: the lease runs on until its end; try again within a second
			l.dropConn()
			if pause = interval; pause > time.Second {
				pause = time.Second
			}
		}
	}
}

// renew extends the lease; ErrLeaseLost if the registry no longer holds it.
func (l *Lease) renew() error {
	ceiling, sent := l.CeilingMs(), time.Now()
	var newCeiling int64
	var markOwn bool
	err := l.query(context.Background(), func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT ceiling_ms, mark_own
			FROM snowflake_lease_renew($1, $2, $3, $4)`, l.NodeID, l.token, l.gen, ceiling).
			Scan(&newCeiling, &markOwn)
	})
	var pgErr *pgconn.PgError
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.As(err, &pgErr) && pgErr.Code == "55000" && strings.Contains(pgErr.Message, " is lost") {
		l.lost = fmt.Errorf("%w: %s", ErrLeaseLost, pgErr.Message)
		return l.lost
	} else if err != nil {
		return err // the member out of reach, or its clock off the registry's: tried again
	}
	if newCeiling > l.ceiling {
		l.ceiling = newCeiling
	}
	l.markOwn = l.markOwn && markOwn
	if ends := sent.Add(time.Duration(l.LeaseMs) * time.Millisecond); ends.After(l.leaseEnds) {
		l.leaseEnds = ends
	}
	return nil
}

// Close stops the renewals and releases the lease (within ctx: a lease not released runs out on
// its own); no ID is made under it afterwards.
func (l *Lease) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	gone := l.lost != nil
	l.lost = fmt.Errorf("%w: node id %d: the lease was released", ErrLeaseLost, l.NodeID)
	var ceiling, lastMs *int64 // lowered to our last ID only while the mark is our lease's
	if c, last := l.ceiling, l.Layout.EpochMs+l.tick*l.Layout.UnitMs; l.markOwn {
		if l.tick < 0 { // no ID made, nor a floor: as low as the registry lets it
			last = l.Layout.EpochMs
		}
		ceiling, lastMs = &c, &last
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done // a renewal under way ends within the timeout
	defer l.dropConn()
	if gone {
		return nil
	}
	return l.query(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT snowflake_lease_release($1, $2, $3, $4, $5)",
			l.NodeID, l.token, l.gen, ceiling, lastMs)
		return err
	})
}
