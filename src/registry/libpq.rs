//! A connection to the registry database through libpq, PostgreSQL's own client library, linked
//! as dblink and postgres_fdw link it: against the system's `libpq.so` (Debian's libpq-dev), by
//! the `#[link(name = "pq")]` below; there is no build script. Every wait — connecting, a
//! query — is on the process latch and the connection's socket with a deadline, as the
//! server's own libpq users wait (`libpqsrv_connect`): a registry that is stopped, not only
//! down, cannot hang the caller, and SIGTERM or a cancel is raised while it waits. Results come
//! back as text.

use pgrx::pg_sys;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::registry::{self, Host};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

#[allow(non_camel_case_types)]
type PGconn = c_void;
#[allow(non_camel_case_types)]
type PGresult = c_void;

// libpq's stable C API (libpq-fe.h); the enums are ints.
const CONNECTION_OK: c_int = 0;
const CONNECTION_BAD: c_int = 1;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_COMMAND_OK: c_int = 1;
const PGRES_TUPLES_OK: c_int = 2;
const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;

#[link(name = "pq")]
unsafe extern "C" {
    fn PQconnectStartParams(
        keywords: *const *const c_char,
        values: *const *const c_char,
        expand_dbname: c_int,
    ) -> *mut PGconn;
    fn PQconnectPoll(conn: *mut PGconn) -> c_int;
    fn PQstatus(conn: *const PGconn) -> c_int;
    fn PQsocket(conn: *const PGconn) -> c_int;
    fn PQerrorMessage(conn: *const PGconn) -> *const c_char;
    fn PQfinish(conn: *mut PGconn);
    fn PQsendQueryParams(
        conn: *mut PGconn,
        command: *const c_char,
        n_params: c_int,
        param_types: *const pg_sys::Oid,
        param_values: *const *const c_char,
        param_lengths: *const c_int,
        param_formats: *const c_int,
        result_format: c_int,
    ) -> c_int;
    fn PQsendQuery(conn: *mut PGconn, command: *const c_char) -> c_int;
    fn PQconsumeInput(conn: *mut PGconn) -> c_int;
    fn PQisBusy(conn: *mut PGconn) -> c_int;
    fn PQgetResult(conn: *mut PGconn) -> *mut PGresult;
    fn PQresultStatus(res: *const PGresult) -> c_int;
    fn PQresultErrorMessage(res: *const PGresult) -> *const c_char;
    fn PQresultErrorField(res: *const PGresult, field: c_int) -> *const c_char;
    fn PQntuples(res: *const PGresult) -> c_int;
    fn PQnfields(res: *const PGresult) -> c_int;
    fn PQfname(res: *const PGresult, column: c_int) -> *const c_char;
    fn PQgetvalue(res: *const PGresult, row: c_int, column: c_int) -> *const c_char;
    fn PQgetisnull(res: *const PGresult, row: c_int, column: c_int) -> c_int;
    fn PQclear(res: *mut PGresult);
    fn PQconninfoParse(conninfo: *const c_char, errmsg: *mut *mut c_char) -> *mut ConninfoOption;
    fn PQconninfoFree(options: *mut ConninfoOption);
    fn PQfreemem(ptr: *mut c_void);
}

/// libpq's `PQconninfoOption`.
#[repr(C)]
struct ConninfoOption {
    keyword: *const c_char,
    envvar: *const c_char,
    compiled: *const c_char,
    val: *const c_char,
    label: *const c_char,
    dispchar: *const c_char,
    dispsize: c_int,
}

/// The hosts `conninfo` names, one at a time (`registry::hosts`), or `None` for one host (or a
/// string libpq cannot parse: its connection says why).
fn hosts_of(conninfo: &CStr) -> Option<Vec<Host>> {
    let mut errmsg: *mut c_char = std::ptr::null_mut();
    // SAFETY: a NUL-terminated string; the options and the message are freed below, once.
    let options = unsafe { PQconninfoParse(conninfo.as_ptr(), &mut errmsg) };
    if !errmsg.is_null() {
        unsafe { PQfreemem(errmsg.cast()) };
    }
    if options.is_null() {
        return None;
    }
    let (mut host, mut hostaddr, mut port) = (None, None, None);
    let mut option = options;
    // SAFETY: an array ended by an option whose keyword is NULL; values copied before the free.
    unsafe {
        while !(*option).keyword.is_null() {
            let value = || {
                let val = (*option).val;
                (!val.is_null()).then(|| CStr::from_ptr(val).to_string_lossy().into_owned())
            };
            match CStr::from_ptr((*option).keyword).to_bytes() {
                b"host" => host = value(),
                b"hostaddr" => hostaddr = value(),
                b"port" => port = value(),
                _ => {}
            }
            option = option.add(1);
        }
        PQconninfoFree(options);
    }
    registry::hosts(host.as_deref(), hostaddr.as_deref(), port.as_deref())
}

/// What went wrong talking to the registry: libpq's message, and the SQLSTATE when the
/// registry's server raised it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub sqlstate: Option<String>,
}

impl Failure {
    fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into().trim_end().to_string(),
            sqlstate: None,
        }
    }
}

/// A result's rows of text values (`None`: SQL NULL), read by column name.
#[derive(Debug, Default)]
pub struct Rows {
    columns: Vec<String>,
    values: Vec<Vec<Option<String>>>,
}

impl Rows {
    fn len(&self) -> usize {
        self.values.len()
    }

    /// The `index`th row, if there is one.
    pub fn row(&self, index: usize) -> Option<Record<'_>> {
        (index < self.len()).then_some(Record { rows: self, index })
    }

    /// Every row, in order.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> {
        (0..self.len()).map(|index| Record { rows: self, index })
    }
}

/// One row of a result.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    rows: &'a Rows,
    index: usize,
}

impl<'a> Record<'a> {
    /// The value of the column named `column` (`None`: SQL NULL, or no such column).
    pub fn get(&self, column: &str) -> Option<&'a str> {
        let at = self.rows.columns.iter().position(|name| name == column)?;
        self.rows.values.get(self.index)?.get(at)?.as_deref()
    }
}

/// An open connection.
pub struct Conn {
    conn: *mut PGconn,
    /// How long each query may take (ms).
    timeout_ms: i64,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: a connection made by PQconnectStartParams, finished once.
        unsafe { PQfinish(self.conn) };
    }
}

/// Settings given before the user's connection string, so that it can override them.
const DEFAULTS: [(&CStr, &CStr); 2] = [
    (c"application_name", c"pg_snowflake"),
    (c"connect_timeout", c"10"),
];

impl Conn {
    /// Connects with the connection string `conninfo`, within `timeout_ms`, which each query
    /// is then given too.
    pub fn connect(conninfo: &str, timeout_ms: i64) -> Result<Conn, Failure> {
        Conn::connect_from(conninfo, timeout_ms, 0).map(|(conn, _)| conn)
    }

    /// [`Conn::connect`] to a string that names several hosts (a registry and its standbys),
    /// one host at a time from the `first`th, each within its share of the time left; returns
    /// the connection and which host it reached, for the next connection to start there.
    pub fn connect_from(
        conninfo: &str,
        timeout_ms: i64,
        first: usize,
    ) -> Result<(Conn, usize), Failure> {
        let deadline = SystemClock.monotonic() + timeout_ms;
        let conninfo = CString::new(conninfo)
            .map_err(|_| Failure::new("the connection string contains a NUL byte"))?;
        let Some(hosts) = hosts_of(&conninfo) else {
            return Conn::start(&conninfo, None, deadline, timeout_ms).map(|conn| (conn, 0));
        };
        let mut failures = vec![];
        for tried in 0..hosts.len() {
            let i = (first + tried) % hosts.len();
            let left = deadline - SystemClock.monotonic();
            let share = SystemClock.monotonic() + left / (hosts.len() - tried) as i64;
            match Conn::start(&conninfo, Some(&hosts[i]), share, timeout_ms) {
                Ok(conn) => return Ok((conn, i)),
                Err(failure) => failures.push(failure.message),
            }
        }
        Err(Failure::new(failures.join("; ")))
    }

    /// Connects with `conninfo`, restricted to `host` if given, by `deadline`.
    fn start(
        conninfo: &CStr,
        host: Option<&Host>,
        deadline: i64,
        timeout_ms: i64,
    ) -> Result<Conn, Failure> {
        let mut keywords: Vec<*const c_char> = DEFAULTS.iter().map(|(k, _)| k.as_ptr()).collect();
        let mut values: Vec<*const c_char> = DEFAULTS.iter().map(|(_, v)| v.as_ptr()).collect();
        keywords.push(c"dbname".as_ptr());
        values.push(conninfo.as_ptr());
        // After dbname, so that they override the lists of the expanded string.
        let restricted: Vec<(&CStr, CString)> = host
            .map(|host| {
                [
                    (c"host", &host.host),
                    (c"hostaddr", &host.hostaddr),
                    (c"port", &host.port),
                ]
                .into_iter()
                .filter_map(|(key, value)| {
                    value
                        .as_deref()
                        .and_then(|v| CString::new(v).ok())
                        .map(|v| (key, v))
                })
                .collect()
            })
            .unwrap_or_default();
        for (key, value) in &restricted {
            keywords.push(key.as_ptr());
            values.push(value.as_ptr());
        }
        keywords.push(std::ptr::null());
        values.push(std::ptr::null());
        // SAFETY: NULL-terminated arrays of NUL-terminated strings that outlive the call; with
        // expand_dbname, a connection string in dbname overrides the earlier settings, and the
        // later ones override it.
        let conn = unsafe { PQconnectStartParams(keywords.as_ptr(), values.as_ptr(), 1) };
        if conn.is_null() {
            return Err(Failure::new("out of memory"));
        }
        let conn = Conn { conn, timeout_ms };
        // SAFETY: a live connection.
        if unsafe { PQstatus(conn.conn) } == CONNECTION_BAD {
            return Err(conn.error());
        }
        loop {
            // SAFETY: a live connection in its asynchronous start.
            let wait = match unsafe { PQconnectPoll(conn.conn) } {
                PGRES_POLLING_OK => return Ok(conn),
                PGRES_POLLING_FAILED => return Err(conn.error()),
                PGRES_POLLING_READING => pg_sys::WL_SOCKET_READABLE,
                PGRES_POLLING_WRITING => pg_sys::WL_SOCKET_WRITEABLE,
                _ => 0,
            };
            conn.wait_for(wait, deadline)?;
        }
    }

    /// Whether the connection is still good (after a failure it is dropped and made anew).
    pub fn is_ok(&self) -> bool {
        // SAFETY: a live connection.
        unsafe { PQstatus(self.conn) == CONNECTION_OK }
    }

    /// Whether the registry's server has not closed this idle connection, checked without
    /// waiting: whatever it sent (its goodbye when it shut down or ended the session) is read,
    /// and a closed socket makes the connection bad. So a holder finds its session gone within
    /// a round of the renewer, not at its next heartbeat.
    pub fn still_open(&self) -> bool {
        // SAFETY: a live connection; `poll` on its socket with no wait.
        unsafe {
            let socket = PQsocket(self.conn);
            if socket < 0 {
                return false;
            }
            let mut ready = libc::pollfd {
                fd: socket,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut ready, 1, 0) > 0 && PQconsumeInput(self.conn) == 0 {
                return false;
            }
        }
        self.is_ok()
    }

    /// Runs `sql` (one statement, or several without parameters) with text `params`, within
    /// the connection's timeout; the rows of the last statement's result.
    pub fn query(&self, sql: &str, params: &[Option<String>]) -> Result<Rows, Failure> {
        let deadline = SystemClock.monotonic() + self.timeout_ms;
        let sql = CString::new(sql).map_err(|_| Failure::new("a query contains a NUL byte"))?;
        let params: Vec<Option<CString>> = params
            .iter()
            .map(|p| p.as_deref().map(CString::new).transpose())
            .collect::<Result<_, _>>()
            .map_err(|_| Failure::new("a parameter contains a NUL byte"))?;
        let pointers: Vec<*const c_char> = params
            .iter()
            .map(|p| p.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()))
            .collect();
        // SAFETY: the strings outlive the call (libpq copies them into its output buffer).
        // Several statements go only without parameters, by the simple protocol.
        let sent = unsafe {
            if pointers.is_empty() {
                PQsendQuery(self.conn, sql.as_ptr())
            } else {
                PQsendQueryParams(
                    self.conn,
                    sql.as_ptr(),
                    pointers.len() as c_int,
                    std::ptr::null(),
                    pointers.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null(),
                    0,
                )
            }
        };
        if sent == 0 {
            return Err(self.error());
        }
        let mut outcome: Result<Rows, Failure> = Ok(Rows::default());
        loop {
            // SAFETY: a live connection with a query sent; each result is cleared once.
            unsafe {
                while PQisBusy(self.conn) != 0 {
                    self.wait_for(pg_sys::WL_SOCKET_READABLE, deadline)?;
                    if PQconsumeInput(self.conn) == 0 {
                        return Err(self.error());
                    }
                }
                let result = PQgetResult(self.conn);
                if result.is_null() {
                    return outcome;
                }
                let status = PQresultStatus(result);
                if outcome.is_ok() {
                    outcome = if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK {
                        Ok(rows_of(result))
                    } else {
                        Err(result_failure(result))
                    };
                }
                PQclear(result);
            }
        }
    }

    /// Waits until the socket is ready for `events` (or, with none, a moment), the latch is set
    /// (raising a pending SIGTERM or cancel), or the deadline passes.
    fn wait_for(&self, events: u32, deadline: i64) -> Result<(), Failure> {
        let left = deadline - SystemClock.monotonic();
        if left <= 0 {
            return Err(Failure::new("timed out"));
        }
        // SAFETY: this process's latch and the connection's socket; no lock held.
        unsafe {
            let wake = pg_sys::WaitLatchOrSocket(
                pg_sys::MyLatch,
                (events | pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH)
                    as c_int,
                PQsocket(self.conn),
                left.min(if events == 0 { 10 } else { left }) as std::ffi::c_long,
                pg_sys::PG_WAIT_EXTENSION,
            );
            if wake & pg_sys::WL_LATCH_SET as c_int != 0 {
                pg_sys::ResetLatch(pg_sys::MyLatch);
            }
        }
        pg_sys::check_for_interrupts!();
        Ok(())
    }

    fn error(&self) -> Failure {
        // SAFETY: a live connection; the message is copied before the next libpq call.
        Failure::new(unsafe { CStr::from_ptr(PQerrorMessage(self.conn)) }.to_string_lossy())
    }
}

/// A result's column names and rows as text.
///
/// # Safety
/// `result` is a live result.
unsafe fn rows_of(result: *const PGresult) -> Rows {
    unsafe {
        let text = |value: *const c_char| CStr::from_ptr(value).to_string_lossy().into_owned();
        Rows {
            columns: (0..PQnfields(result))
                .map(|column| text(PQfname(result, column)))
                .collect(),
            values: (0..PQntuples(result))
                .map(|row| {
                    (0..PQnfields(result))
                        .map(|column| {
                            (PQgetisnull(result, row, column) == 0)
                                .then(|| text(PQgetvalue(result, row, column)))
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// A failed result's message and SQLSTATE.
///
/// # Safety
/// `result` is a live result.
unsafe fn result_failure(result: *const PGresult) -> Failure {
    unsafe {
        let sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
        Failure {
            message: CStr::from_ptr(PQresultErrorMessage(result))
                .to_string_lossy()
                .trim_end()
                .to_string(),
            sqlstate: (!sqlstate.is_null())
                .then(|| CStr::from_ptr(sqlstate).to_string_lossy().into_owned()),
        }
    }
}
