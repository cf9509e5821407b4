//! The catalogue's machinery: [`catalogue!`], which makes an error enum and its wording from one
//! row per variant, and the [`Row`]s the docs check reads (`tests.rs`, against docs/ERRORS.md).
//!
//! A row is `Variant { field: Type, … } => { LEVEL SQLSTATE message … detail … hint … }`:
//! - LEVEL is `ERROR`, or `WARNING`, `NOTICE` or `LOG` for what is not an error (the level its
//!   callers report it at; docs/ERRORS.md says the same);
//! - `message`, `detail` (left out: none) and `hint` are each a string literal whose `{field}`s
//!   are the variant's fields, or `("… {} …", expr, …)` where a field is shown through a function
//!   (`quoted(column)`, `when(*until)`); a detail or hint that truly depends on the data is a
//!   block calling a small helper (`detail { Some(no_sequence_detail(default)) }`). The message is
//!   always a literal, so that the docs check can read it.
//!
//! A variant `Name(Family)` carries another family's errors (a `From` is made for it); a row
//! `=> [message, rows, row_name]` takes its whole message from a family worded by a function
//! (`refused`).

use super::report::Message;
#[cfg(test)]
use pgrx::PgSqlErrorCode;

/// The level a variant is reported at.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
    Notice,
    Log,
}

/// One row of the catalogue as the docs check reads it.
#[cfg(test)]
#[derive(Clone, Debug)]
pub struct Row {
    /// The enum the variant is of (`Refusal` for the registry's refusals).
    pub family: &'static str,
    pub variant: &'static str,
    pub sqlstate: PgSqlErrorCode,
    pub level: Level,
    /// The message's template: `{field}` and `{}` stand for what the row interpolates.
    pub message: &'static str,
}

/// A family of errors: its wording and its rows.
pub trait Family {
    fn message(&self) -> Message;
    #[cfg(test)]
    fn rows() -> Vec<Row>;
    /// The family and variant of the row that words this error.
    #[cfg(test)]
    fn row_name(&self) -> (&'static str, &'static str);
}

/// Makes an error enum and its wording from rows (the module doc above), or, in the form
/// `fn name(value: &Enum, context…), rows rows_name { rows }`, the wording of an enum defined
/// elsewhere (the core's) as a function.
macro_rules! catalogue {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident
                $( { $($field:ident : $fty:ty),* $(,)? } )?
                $( ( $family:ty ) )?
                $( => $row:tt )?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$vmeta])* $variant $({ $($field: $fty),* })? $(($family))? ),*
        }

        impl $name {
            /// The SQLSTATE, message, detail and hint of this error.
            #[allow(unused_variables, clippy::useless_format)]
            pub fn message(&self) -> $crate::error::Message {
                match self {
                    $(
                        $name::$variant $({ $($field),* })?
                            $(( catalogue!(@bind [$family] family) ))?
                            => catalogue!(@body [$($row)?] [$($family)?] family),
                    )*
                }
            }
        }

        impl $crate::error::catalogue::Family for $name {
            fn message(&self) -> $crate::error::Message {
                $name::message(self)
            }

            #[cfg(test)]
            #[allow(clippy::vec_init_then_push)]
            fn rows() -> Vec<$crate::error::catalogue::Row> {
                let mut rows = Vec::new();
                $( catalogue!(@rows rows, $name, $variant, [$($row)?] [$($family)?]); )*
                rows
            }

            #[cfg(test)]
            #[allow(unused_variables)]
            fn row_name(&self) -> (&'static str, &'static str) {
                match self {
                    $(
                        $name::$variant $({ $($field),* })?
                            $(( catalogue!(@bind [$family] family) ))?
                            => catalogue!(@name $name, $variant, [$($row)?] [$($family)?] family),
                    )*
                }
            }
        }

        $($( impl From<$family> for $name {
            fn from(error: $family) -> Self {
                $name::$variant(error)
            }
        } )?)*
    };

    (
        $(#[$meta:meta])*
        fn $fname:ident ($value:ident : & $enum:ident $(, $param:ident : $pty:ty)* $(,)?),
            rows $rows:ident, row_name $row_name:ident {
            $(
                $variant:ident
                $( { $($field:ident),* $(,)? } )?
                $( ( $($tfield:ident),* ) )?
                => $row:tt
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[allow(unused_variables, clippy::useless_format)]
        pub(super) fn $fname($value: &$enum $(, $param: $pty)*) -> $crate::error::Message {
            match $value {
                $( $enum::$variant $({ $($field),* })? $(( $($tfield),* ))? => {
                    catalogue!(@body [$row] [] _)
                } )*
            }
        }

        /// The rows of this wording, for the docs check.
        #[cfg(test)]
        #[allow(clippy::vec_init_then_push)]
        pub(super) fn $rows() -> Vec<$crate::error::catalogue::Row> {
            let mut rows = Vec::new();
            $( catalogue!(@rows rows, $enum, $variant, [$row] []); )*
            rows
        }

        /// The family and variant of the row that words this value.
        #[cfg(test)]
        pub(super) fn $row_name($value: &$enum) -> (&'static str, &'static str) {
            match $value {
                $( $enum::$variant { .. } => (stringify!($enum), stringify!($variant)), )*
            }
        }
    };

    (@bind [$family:ty] $bind:ident) => { $bind };
    (@body [] [$family:ty] $bind:ident) => {
        $crate::error::catalogue::Family::message($bind)
    };
    (@body [[$message:expr, $rows:expr, $row_name:expr]] [] $bind:tt) => {
        $message
    };
    (@body [{ $level:ident $code:ident message $m:tt $(detail $d:tt)? hint $h:tt }] [] $bind:tt)
    => {
        $crate::error::Message {
            sqlstate: ::pgrx::PgSqlErrorCode::$code,
            text: catalogue!(@text $m),
            detail: catalogue!(@detail $($d)?),
            hint: String::from(catalogue!(@text $h)),
        }
    };

    (@text $text:literal) => { format!($text) };
    (@text ($text:literal $(, $arg:expr)* $(,)?)) => { format!($text $(, $arg)*) };
    (@text { $($helper:tt)* }) => { { $($helper)* } };
    (@detail) => { None };
    (@detail { $($helper:tt)* }) => { { $($helper)* } };
    (@detail $d:tt) => { Some(catalogue!(@text $d)) };

    (@rows $v:ident, $enum:ident, $variant:ident, [] [$family:ty]) => {
        $v.extend(<$family as $crate::error::catalogue::Family>::rows())
    };
    (@rows $v:ident, $enum:ident, $variant:ident, [[$message:expr, $rows:expr, $name:expr]] []) => {
        $v.extend($rows)
    };
    (@rows $v:ident, $enum:ident, $variant:ident,
        [{ $level:ident $code:ident message $m:tt $($rest:tt)* }] []) => {
        $v.push($crate::error::catalogue::Row {
            family: stringify!($enum),
            variant: stringify!($variant),
            sqlstate: ::pgrx::PgSqlErrorCode::$code,
            level: catalogue!(@level $level),
            message: catalogue!(@template $m),
        })
    };
    (@name $name:ident, $variant:ident, [] [$family:ty] $bind:ident) => {
        $crate::error::catalogue::Family::row_name($bind)
    };
    (@name $name:ident, $variant:ident, [[$message:expr, $rows:expr, $row_name:expr]] []
        $bind:ident) => {
        $row_name
    };
    (@name $name:ident, $variant:ident, [{ $($row:tt)* }] [] $bind:ident) => {
        (stringify!($name), stringify!($variant))
    };
    (@template $text:literal) => { $text };
    (@template ($text:literal $(, $arg:expr)* $(,)?)) => { $text };
    (@level ERROR) => { $crate::error::catalogue::Level::Error };
    (@level WARNING) => { $crate::error::catalogue::Level::Warning };
    (@level NOTICE) => { $crate::error::catalogue::Level::Notice };
    (@level LOG) => { $crate::error::catalogue::Level::Log };
}

pub(crate) use catalogue;
