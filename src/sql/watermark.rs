//! `snowflake_watermark()`: a thin wrapper over `watermark.rs`.

use crate::error::OrReport;
use crate::watermark;
use pgrx::prelude::*;

/// An ID below which every ID this server has issued belongs to a transaction that has ended:
/// committed and visible to every snapshot taken after the call, or aborted; IDs issued after
/// the call are above it. VOLATILE and PARALLEL RESTRICTED like `snowflake_nextval()`: it draws
/// an ID.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_watermark() -> i64 {
    watermark::watermark().or_report()
}

extension_sql_file!(
    "../../sql/install/watermark_comment.sql",
    name = "watermark_comment",
    requires = [snowflake_watermark],
);
