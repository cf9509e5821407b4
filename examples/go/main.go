// pg_snowflake with pgx v4 (Debian's golang-github-jackc-pgx-v4-dev, built with Debian's Go in
// GOPATH mode): the recipe of docs/CLIENTS.md#go-pgx, and its test.
//
// Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
// NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
// A failed check exits non-zero.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

const nodeID = 7                // the test server's pg_snowflake.node_id (scripts/test/clients)
const largestID = math.MaxInt64 // the last ID of the layout: 19 digits

var ctx = context.Background()

// snippet: migrate
func migrate(conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_snowflake;
		CREATE TABLE IF NOT EXISTS orders (
			id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
			item text NOT NULL)`)
	return err
}

// An order as an API sends it: ",string" writes the ID as a JSON string, which JavaScript
// clients read exactly (a JavaScript Number cannot hold it); Go reads it back into an int64.
type Order struct {
	ID   int64  `json:"id,string"`
	Item string `json:"item"`
}

// end snippet

func main() {
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	must(err)
	defer conn.Close(ctx)
	must(migrate(conn))
	say("1. table declared with DEFAULT snowflake_nextval()")

	// snippet: insert
	var id int64
	err = conn.QueryRow(ctx, "INSERT INTO orders (item) VALUES ($1) RETURNING id", "apple").Scan(&id)
	must(err)

	batch := &pgx.Batch{} // 5,000 INSERTs sent at once, their results read in order
	for i := 0; i < 5000; i++ {
		batch.Queue("INSERT INTO orders (item) VALUES ($1) RETURNING id", fmt.Sprintf("bulk %d", i))
	}
	results := conn.SendBatch(ctx, batch)
	bulkIDs := make([]int64, 5000)
	for i := range bulkIDs {
		must(results.QueryRow().Scan(&bulkIDs[i]))
	}
	must(results.Close())
	// end snippet
	check(id > 0, "positive id %d", id)
	checkBulk(conn, bulkIDs)
	say("2. single insert returned %d; 5,000 batched IDs returned in order", id)

	// snippet: round-trip
	const end = "snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')"
	var largest int64
	must(conn.QueryRow(ctx, "SELECT "+end).Scan(&largest))
	text, err := json.Marshal(Order{ID: largest, Item: "far"}) // {"id":"9223372036854775807",...}
	must(err)
	var back Order
	must(json.Unmarshal(text, &back))
	var same bool
	must(conn.QueryRow(ctx, "SELECT $1::bigint = "+end, back.ID).Scan(&same))
	// end snippet
	check(largest == largestID && len(strconv.FormatInt(largest, 10)) == 19, "largest %d", largest)
	check(string(text) == `{"id":"9223372036854775807","item":"far"}`, "json %s", text)
	check(back.ID == largestID && same, "back %d same %v", back.ID, same)
	// As a JSON number into an int64 the ID is exact too; only an untyped decode (into any) would
	// make it a float64, which cannot hold it.
	var asNumber struct{ ID int64 }
	must(json.Unmarshal([]byte(`{"ID":9223372036854775807}`), &asNumber))
	check(asNumber.ID == largestID, "number %d", asNumber.ID)
	var untyped map[string]any
	must(json.Unmarshal([]byte(`{"id":9223372036854775807}`), &untyped))
	check(untyped["id"].(float64) == math.Pow(2, 63), "a float64 rounds it")
	var item string
	var again Order
	encoded, _ := json.Marshal(Order{ID: id, Item: "apple"})
	must(json.Unmarshal(encoded, &again))
	must(conn.QueryRow(ctx, "SELECT item FROM orders WHERE id = $1", again.ID).Scan(&item))
	check(item == "apple", "item %q", item)
	say("3. 19 digits through pgx (int64) and encoding/json, both ways")

	seedHistory(conn) // 100,000 older rows: the table of an application that has run a while

	// snippet: decode
	var ts, tsOnly time.Time
	var node, seq int32
	err = conn.QueryRow(ctx, `SELECT d.ts, d.node_id, d.seq, snowflake_timestamp(o.id)
		FROM orders o, snowflake_decode(o.id) d WHERE o.id = $1`, id).Scan(&ts, &node, &seq, &tsOnly)
	must(err)

	const lastHour = `SELECT id FROM orders
		WHERE id >= snowflake_from_timestamp(now() - interval '1 hour')`
	recent := queryInt64s(conn, lastHour)
	var plan []string
	rows, err := conn.Query(ctx, "EXPLAIN "+lastHour)
	must(err)
	for rows.Next() {
		var line string
		must(rows.Scan(&line))
		plan = append(plan, line)
	}
	must(rows.Err())
	// end snippet
	check(node == nodeID, "node %d", node)
	check(seq >= 0 && seq < 4096, "seq %d", seq)
	check(ts.Equal(tsOnly), "%v vs %v", ts, tsOnly)
	check(time.Since(ts).Abs() < 2*time.Minute, "ts %v", ts)
	mine := append([]int64{id}, bulkIDs...)
	sort.Slice(mine, func(i, j int) bool { return mine[i] < mine[j] })
	sort.Slice(recent, func(i, j int) bool { return recent[i] < recent[j] })
	check(fmt.Sprint(recent) == fmt.Sprint(mine), "last hour: %d rows", len(recent))
	joined := strings.Join(plan, "\n")
	check(strings.Contains(joined, "orders_pkey") && !strings.Contains(joined, "Seq Scan"), "plan %s", joined)
	say("4. decoded (node %d, seq %d, %v); last hour by key: %s", node, seq, ts.UTC(), plan[0])

	// snippet: errors
	for _, c := range []struct{ url, sqlstate, message string }{
		{os.Getenv("NODE_UNSET_URL"), "F0000", "pg_snowflake.node_id is not set"},
		{os.Getenv("NOT_PRELOADED_URL"), "55000", "pg_snowflake must be loaded via shared_preload_libraries"},
	} {
		other, err := pgx.Connect(ctx, c.url)
		must(err)
		must(migrate(other))
		_, err = other.Exec(ctx, "INSERT INTO orders (item) VALUES ('pear')")
		var pgErr *pgconn.PgError
		check(errors.As(err, &pgErr) && pgErr.Code == c.sqlstate, "SQLSTATE of %v", err)
		check(pgErr.Message == c.message, "message %q", pgErr.Message)
		other.Close(ctx)
		say("5. %s: %s", pgErr.Code, pgErr.Message)
	}
	// end snippet
	say("all five points hold")
}

// checkBulk: 5,000 IDs, positive, distinct, increasing, and each the ID of its own row.
func checkBulk(conn *pgx.Conn, ids []int64) {
	check(len(ids) == 5000, "%d ids", len(ids))
	for i, id := range ids {
		check(id > 0 && (i == 0 || id > ids[i-1]), "increasing and distinct at %d", i)
	}
	items := map[int64]string{}
	rows, err := conn.Query(ctx, "SELECT id, item FROM orders WHERE id = ANY($1)", ids)
	must(err)
	for rows.Next() {
		var id int64
		var item string
		must(rows.Scan(&id, &item))
		items[id] = item
	}
	must(rows.Err())
	for i, id := range ids {
		check(items[id] == fmt.Sprintf("bulk %d", i), "row of id %d", id)
	}
}

func queryInt64s(conn *pgx.Conn, sql string) []int64 {
	rows, err := conn.Query(ctx, sql)
	must(err)
	var out []int64
	for rows.Next() {
		var v int64
		must(rows.Scan(&v))
		out = append(out, v)
	}
	must(rows.Err())
	return out
}

// seedHistory: 100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; ANALYZE.
func seedHistory(conn *pgx.Conn) {
	_, err := conn.Exec(ctx, `INSERT INTO orders (id, item)
		SELECT snowflake_from_timestamp(now() - interval '30 days' + g * interval '10 seconds'), 'old'
		FROM generate_series(0, 99999) g`)
	must(err)
	_, err = conn.Exec(ctx, "ANALYZE orders")
	must(err)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "go:", err)
		os.Exit(1)
	}
}

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "go: check failed: "+format+"\n", args...)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("go: "+format+"\n", args...)
}
