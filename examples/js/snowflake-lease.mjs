// pg_snowflake IDs made in a Node.js process, under a node id leased from the fleet's registry.
//
// A process that makes its own IDs (Kafka keys, outbox rows, client-side batches) takes a node id
// from the registry the fleet's servers use, through any member server (docs/FLEETS.md,
// "Applications"), so that no two processes, and no server, ever stamp IDs under one node id:
//
//   const ids = await SnowflakeLease.acquire({ connectionString }, 'orders-producer');
//   try { const key = await ids.nextId(); } finally { await ids.close(); }
//
// The lease is taken on start (its token lives in this process only), renewed by a timer three
// times a lease, and released on close. IDs are BigInts, made in process with the fleet's layout
// as the lease reports it. No ID is ever stamped above the ceiling the registry granted, nor at or
// below the floor it resumed from; after a clock step back nextId() waits until the clock passes
// its last ID, and rejects with ClockBehind when that wait would outlast the lease. Once the
// registry says the lease is lost, every call rejects with LeaseLost: take a new lease.
//
// Needs node-postgres (pg), and a role that is a member of snowflake_lease on the member server.
import pg from 'pg';

/** No ID can be made under the lease now. */
export class LeaseError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}
/** The registry no longer holds this lease (it ran out and was retired, or it was released). */
export class LeaseLost extends LeaseError {}
/** No renewal succeeded for a whole lease; IDs resume at the next renewal. */
export class LeaseExpired extends LeaseError {}
/** The next ID would be stamped past the ceiling the registry granted. */
export class CeilingReached extends LeaseError {}
/** The clock stepped back further than the lease lets this process wait for it. */
export class ClockBehind extends LeaseError {}

// The clocks, read in one place each: Unix ms, and a monotonic ms that never steps.
export const clocks = {
  wall: () => Date.now(),
  monotonic: () => performance.now(),
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @typedef {object} Layout How the fleet splits an ID: time | node | sequence, time in unitMs
 *   since epochMs.
 * @property {number} epochMs
 * @property {number} unitMs
 * @property {number} timeBits
 * @property {number} nodeBits
 * @property {number} sequenceBits
 */

export class SnowflakeLease {
  /**
   * Takes a lease through the member server `config` names (a pg.Client configuration).
   * @param {pg.ClientConfig | string} config
   * @param {string} label how the registry names this application
   * @returns {Promise<SnowflakeLease>}
   */
  static async acquire(config, label) {
    // A member that never answers must not hang the renewals for good (the caller's win).
    const settings = {
      connectionTimeoutMillis: 10_000,
      query_timeout: 10_000,
      ...(typeof config === 'string' ? { connectionString: config } : config),
    };
    const sent = clocks.monotonic();
    const client = new pg.Client(settings);
    client.on('error', () => {}); // a broken link is met by the next query
    await client.connect();
    try {
      const { rows: [row] } = await client.query(
        `SELECT node_id, token, generation, floor_ms, ceiling_ms, lease_ms, epoch_ms, unit_ms,
                time_bits, node_bits, sequence_bits FROM snowflake_lease_acquire($1)`, [label]);
      return new SnowflakeLease(settings, client, row, sent);
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
  }

  /** @private Use SnowflakeLease.acquire(). */
  constructor(config, client, row, sent) {
    this.#config = config;
    this.#client = client;
    /** @readonly */ this.nodeId = row.node_id;
    this.#token = row.token;
    this.#generation = row.generation; // a bigint's text, passed back as it came
    this.#ceiling = Number(row.ceiling_ms);
    /** @readonly */ this.leaseMs = Number(row.lease_ms);
    /** @readonly @type {Layout} */
    this.layout = Object.freeze({
      epochMs: Number(row.epoch_ms),
      unitMs: Number(row.unit_ms),
      timeBits: row.time_bits,
      nodeBits: row.node_bits,
      sequenceBits: row.sequence_bits,
    });
    this.#leaseEnds = sent + this.leaseMs; // monotonic: never after the registry's end
    this.#maxSeq = 2 ** this.layout.sequenceBits - 1;
    this.#maxTick = 2 ** this.layout.timeBits - 1;
    // The floor counts as our last stamp, its sequence used up: the first ID lies above it.
    this.#tick = row.floor_ms === null ? -1 : this.#tickOf(Number(row.floor_ms));
    this.#seq = this.#maxSeq;
    this.#schedule(this.#interval());
  }

  #config; #client; #token; #generation; #ceiling; #leaseEnds; #maxSeq; #maxTick; #tick; #seq;
  #markOwn = true; // the registry's mark is the one our lease wrote
  #lost = null; // the LeaseError every call meets from now on
  #closed = false;
  #timer = null;
  #renewing = null;

  /** The latest time (Unix ms) an ID of this lease may be stamped at, for now. */
  get ceilingMs() {
    return this.#ceiling;
  }

  /**
   * The next ID: greater than every ID this lease made before, unique across the fleet.
   * @returns {Promise<bigint>}
   */
  async nextId() {
    for (;;) {
      this.#usable();
      const now = clocks.wall();
      let tick = this.#tickOf(now);
      let seq = 0;
      if (tick <= this.#tick) {
        if (this.#seq < this.#maxSeq) {
          [tick, seq] = [this.#tick, this.#seq + 1]; // the clock at or behind our last stamp
        } else {
          await this.#hold(now);
          continue;
        }
      }
      if (tick > this.#maxTick) throw new CeilingReached("the layout's time field is used up");
      const stamp = this.layout.epochMs + tick * this.layout.unitMs;
      if (stamp > this.#ceiling) {
        throw new CeilingReached(`node id ${this.nodeId}: the next ID would be stamped at ${stamp}`
          + ` ms, past the lease's ceiling ${this.#ceiling} ms`);
      }
      [this.#tick, this.#seq] = [tick, seq];
      const { nodeBits, sequenceBits } = this.layout;
      return (BigInt(tick) << BigInt(nodeBits + sequenceBits))
        | (BigInt(this.nodeId) << BigInt(sequenceBits)) | BigInt(seq);
    }
  }

  #tickOf(unixMs) {
    return Math.floor((unixMs - this.layout.epochMs) / this.layout.unitMs);
  }

  /** Waits until the clock passes our last stamp, or rejects if that outlasts the lease. */
  async #hold(now) {
    const wait = this.layout.epochMs + (this.#tick + 1) * this.layout.unitMs - now;
    if (wait > this.#leaseEnds - clocks.monotonic()) {
      throw new ClockBehind(`node id ${this.nodeId}: the clock is ${wait} ms behind the last ID,`
        + ' longer than the lease lets this process wait');
    }
    await sleep(Math.max(wait, 0));
  }

  #usable() {
    if (this.#lost) throw this.#lost;
    const left = this.#leaseEnds - clocks.monotonic();
    if (left <= 0) {
      throw new LeaseExpired(`node id ${this.nodeId}: no renewal for ${Math.round(this.leaseMs - left)} ms`);
    }
  }

  #interval() {
    return Math.max(this.leaseMs / 3, 100);
  }

  #schedule(ms) {
    if (this.#closed) return;
    // unref: a process that exits without close() is not kept alive; its lease lapses.
    this.#timer = setTimeout(() => {
      this.#renewing = this.renew().then(
        () => this.#schedule(this.#interval()),
        (error) => {
          // Lost: no more renewals. Out of reach: the lease runs on until its end.
          if (!(error instanceof LeaseLost) && !this.#lost) {
            this.#schedule(Math.min(this.#interval(), 1000));
          }
        });
    }, ms);
    this.#timer.unref();
  }

  /** Extends the lease (the timer calls this); rejects with LeaseLost if it is gone. */
  async renew() {
    const sent = clocks.monotonic();
    let row;
    try {
      ({ rows: [row] } = await (await this.#connection()).query(
        'SELECT ceiling_ms, mark_own FROM snowflake_lease_renew($1, $2, $3, $4)',
        [this.nodeId, this.#token, this.#generation, this.#ceiling]));
    } catch (error) {
      if (error.code === '55000' && error.message.includes(' is lost')) {
        this.#lost ??= new LeaseLost(error.message);
        throw this.#lost;
      }
      await this.#dropConnection();
      throw error;
    }
    this.#ceiling = Math.max(this.#ceiling, Number(row.ceiling_ms));
    this.#markOwn &&= row.mark_own;
    this.#leaseEnds = Math.max(this.#leaseEnds, sent + this.leaseMs);
  }

  async #connection() {
    if (!this.#client) {
      const client = new pg.Client(this.#config);
      client.on('error', () => {}); // a broken link is met by the next query
      await client.connect();
      this.#client = client;
    }
    return this.#client;
  }

  async #dropConnection() {
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }

  /** Stops the renewals and releases the lease; no ID is made under it afterwards. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    const gone = this.#lost !== null;
    this.#lost = new LeaseLost(`node id ${this.nodeId}: the lease was released`);
    clearTimeout(this.#timer);
    await this.#renewing?.catch(() => {});
    try {
      if (!gone) {
        const last = this.layout.epochMs + Math.max(this.#tick, 0) * this.layout.unitMs;
        await (await this.#connection()).query(
          'SELECT snowflake_lease_release($1, $2, $3, $4, $5)',
          [this.nodeId, this.#token, this.#generation,
            this.#markOwn ? this.#ceiling : null, this.#markOwn ? last : null]);
      }
    } finally {
      await this.#dropConnection();
    }
  }
}
