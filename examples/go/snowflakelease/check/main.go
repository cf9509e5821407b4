// The test of package snowflakelease against real servers, driven by
// pgrx-tests/tests/app_leases.rs (built in GOPATH mode, the package linked into a GOPATH of its own).
//
//	check CONNINFO LABEL make N   N IDs, printed one a line, then released
//	check CONNINFO LABEL hold     IDs every few ms until killed; an error line
//	                              ("error: Name: text") per failure
//	check CONNINFO LABEL clock    the clock stepped back and ahead
//	check CONNINFO - bench SECS   bench/lease-clients: acquire to first ID, IDs per second, a
//	                              plain counter under a mutex beside (the ceiling: no module
//	                              proxy here for a Go snowflake library)
//	check CONNINFO - idle SECS    a lease held SECS seconds, no ID made
//
// Every line is "lease NODE CEILING LEASE_MS", "id ID", "key ID" (the recipe's, under a lease of
// its own), "error: ..." or "done"; a failed check exits non-zero.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"snowflakelease"
)

var ctx = context.Background()

// snippet: lease
// Kafka keys for orders, made in this process under a node id leased from the fleet.
func keyed(connString string, orders []string) (map[int64]string, error) {
	ids, err := snowflakelease.Acquire(ctx, connString, "orders-producer", snowflakelease.Options{})
	if err != nil {
		return nil, err
	}
	defer ids.Close(ctx)
	keys := make(map[int64]string, len(orders))
	for _, order := range orders {
		key, err := ids.Next()
		if err != nil {
			return nil, err // errors.Is(err, snowflakelease.ErrLeaseLost): take a new lease
		}
		keys[key] = order
	}
	return keys, nil
}

// end snippet

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "check failed: "+format+"\n", args...)
		os.Exit(1)
	}
}

func must(err error) {
	check(err == nil, "%v", err)
}

// The name of a lease error, as the Python and Node checks print theirs.
func name(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{snowflakelease.ErrLeaseLost, "LeaseLost"}, {snowflakelease.ErrLeaseExpired, "LeaseExpired"},
		{snowflakelease.ErrCeilingReached, "CeilingReached"}, {snowflakelease.ErrClockBehind, "ClockBehind"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	check(false, "not a lease error: %v", err)
	return ""
}

func increasing(ids []int64) {
	for i := 1; i < len(ids); i++ {
		check(ids[i] > ids[i-1], "an ID went backwards: %d after %d", ids[i], ids[i-1])
	}
}

func clock(lease *snowflakelease.Lease, offset *atomic.Int64) {
	first, err := lease.Next()
	must(err)
	ids := []int64{first}
	// Back by a second: held until the clock passes the last ID, never backwards.
	offset.Store(-1000)
	started := time.Now()
	for i := 0; i < 5000; i++ {
		id, err := lease.Next()
		must(err)
		ids = append(ids, id)
	}
	held := time.Since(started)
	check(held >= 900*time.Millisecond, "held %v for a step back of 1 s", held)
	say("held %.2f s", held.Seconds())
	// Back by an hour: the last ID's sequence is used up, then the wait would outlast the lease.
	offset.Store(-3_600_000)
	for i := 0; ; i++ {
		id, err := lease.Next()
		if err != nil {
			check(errors.Is(err, snowflakelease.ErrClockBehind), "%v", err)
			say("error: %s: %v", name(err), err)
			break
		}
		check(i <= 1<<lease.Layout.SequenceBits, "an ID an hour behind")
		ids = append(ids, id)
	}
	// Ahead by an hour: past the ceiling.
	offset.Store(3_600_000)
	_, err = lease.Next()
	check(errors.Is(err, snowflakelease.ErrCeilingReached), "an ID an hour ahead: %v", err)
	say("error: %s: %v", name(err), err)
	offset.Store(0)
	last, err := lease.Next()
	must(err)
	ids = append(ids, last)
	increasing(ids)
	for _, id := range ids {
		say("id %d", id)
	}
}

// rate is the IDs per second of one goroutine calling next for secs seconds.
func rate(next func() (int64, error), secs float64) float64 {
	start := time.Now()
	end := start.Add(time.Duration(secs * float64(time.Second)))
	for n := 1000; ; n += 1000 {
		for i := 0; i < 1000; i++ {
			_, err := next()
			must(err)
		}
		if time.Now().After(end) {
			return float64(n) / time.Since(start).Seconds()
		}
	}
}

func bench(conninfo, mode string, secs float64) {
	started := time.Now()
	lease, err := snowflakelease.Acquire(ctx, conninfo, mode, snowflakelease.Options{})
	must(err)
	if mode == "idle" {
		time.Sleep(time.Duration(secs * float64(time.Second)))
		must(lease.Close(ctx))
		return
	}
	_, err = lease.Next()
	must(err)
	say("first_id_ms %.1f", time.Since(started).Seconds()*1000)
	say("lease_ids_per_s %.0f", rate(lease.Next, secs))
	must(lease.Close(ctx))
	var mu sync.Mutex
	var counter int64
	say("other counter %.0f", rate(func() (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		counter++
		return counter, nil
	}, secs))
}

func main() {
	conninfo, label, mode := os.Args[1], os.Args[2], os.Args[3]
	if mode == "bench" || mode == "idle" {
		secs, err := strconv.ParseFloat(os.Args[4], 64)
		must(err)
		bench(conninfo, mode, secs)
		return
	}
	if mode == "make" {
		keys, err := keyed(conninfo, []string{"apple", "pear"})
		must(err)
		check(len(keys) == 2, "keys %v", keys)
		for key := range keys {
			say("key %d", key)
		}
	}
	// The clock IDs are stamped from, stepped by the clock mode.
	var offset atomic.Int64
	wall := func() time.Time { return time.Now().Add(time.Duration(offset.Load()) * time.Millisecond) }
	lease, err := snowflakelease.Acquire(ctx, conninfo, label, snowflakelease.Options{Clock: wall})
	must(err)
	say("lease %d %d %d", lease.NodeID, lease.CeilingMs(), lease.LeaseMs)
	switch mode {
	case "make":
		n, err := strconv.Atoi(os.Args[4])
		must(err)
		ids := make([]int64, n)
		for i := range ids {
			ids[i], err = lease.Next()
			must(err)
		}
		increasing(ids)
		for _, id := range ids {
			say("id %d", id)
		}
	case "hold":
		for {
			if id, err := lease.Next(); err != nil {
				say("error: %s: %v", name(err), err)
			} else {
				say("id %d", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
	case "clock":
		clock(lease, &offset)
	default:
		check(false, "unknown mode %s", mode)
	}
	must(lease.Close(ctx))
	say("done")
}
