//! The catalogue's machinery: [`catalogue!`], which makes an error enum and its wording from one
//! row per variant, and the [`Row`]s the docs check reads (`tests.rs`, against docs/ERRORS.md).
//!
//! A row is `Variant { field: Type, … } => { LEVEL SQLSTATE message … detail … hint … }`:
//! - LEVEL is `ERROR`, or `WARNING`, `NOTICE` or `LOG` for what is not an error (the level its
//!   callers report it at; docs/ERRORS.md says the same);
//! - `message`, `detail` (left out: none) and `hint` are each a string literal whose `{field}`s
//!   are the variant's fields, or `("… {} …", expr, …)` where a field is shown through a function
//!   (`quoted(column)`, `when(*until)`); a detail or hint that depends on the data is a block
//!   (`detail { Some(…) }`). The message is always a literal, so that the docs check can read it.
//!
//! A row `=> [message, rows]` takes the whole message from elsewhere: `Name(error: Family)`
//! carries another family's errors (a `From` is made for it); the form
//! `fn name(value: &Enum, context…), rows rows_name { rows }` words an enum defined elsewhere
//! (the core's) as a function.

/// One row of the catalogue as the docs check reads it: the enum and variant, the SQLSTATE, the
/// level, and the message's template (`{field}` and `{}` stand for what the row interpolates).
#[cfg(test)]
#[derive(Clone, Debug)]
pub struct Row {
    pub family: &'static str,
    pub variant: &'static str,
    pub sqlstate: pgrx::PgSqlErrorCode,
    pub level: &'static str,
    pub message: &'static str,
}

macro_rules! catalogue {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $(
            $(#[$vmeta:meta])*
            $variant:ident $({ $($field:ident : $fty:ty),* $(,)? })? $(($bind:ident : $family:ty))?
            => $row:tt
        ),* $(,)? }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$vmeta])* $variant $({ $($field: $fty),* })? $(($family))? ),*
        }

        impl $name {
            /// The SQLSTATE, message, detail and hint of this error.
            #[allow(unused_variables, clippy::useless_format)]
            pub fn message(&self) -> $crate::error::Message {
                match self { $(
                    $name::$variant $({ $($field),* })? $(($bind))?
                        => catalogue!(@body $name $variant $row),
                )* }
            }

            /// The rows of this family, for the docs check.
            #[cfg(test)]
            pub fn rows() -> Vec<$crate::error::catalogue::Row> {
                [$( catalogue!(@rows $name $variant $row) ),*].concat()
            }
        }

        $($( impl From<$family> for $name {
            fn from(error: $family) -> Self { $name::$variant(error) }
        } )?)*
    };

    (
        $(#[$meta:meta])*
        fn $fname:ident ($value:ident : & $enum:ident $(, $param:ident : $pty:ty)* $(,)?),
            rows $rows:ident { $(
            $variant:ident $({ $($field:ident),* $(,)? })? $(($($tfield:ident),*))? => $row:tt
        ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[allow(unused_variables, clippy::useless_format)]
        pub(super) fn $fname($value: &$enum $(, $param: $pty)*) -> $crate::error::Message {
            match $value { $(
                $enum::$variant $({ $($field),* })? $(($($tfield),*))?
                    => catalogue!(@body $enum $variant $row),
            )* }
        }

        /// The rows of this wording, for the docs check.
        #[cfg(test)]
        pub(super) fn $rows() -> Vec<$crate::error::catalogue::Row> {
            [$( catalogue!(@rows $enum $variant $row) ),*].concat()
        }
    };

    (@body $e:ident $v:ident [$message:expr, $rows:expr]) => { $message };
    (@body $e:ident $v:ident
        { $level:ident $code:ident message $m:tt $(detail $d:tt)? hint $h:tt }) => {
        $crate::error::Message {
            sqlstate: ::pgrx::PgSqlErrorCode::$code,
            text: catalogue!(@text $m),
            detail: catalogue!(@detail $($d)?),
            hint: String::from(catalogue!(@text $h)),
            #[cfg(test)]
            row: (stringify!($e), stringify!($v)),
        }
    };

    (@text $text:literal) => { format!($text) };
    (@text ($text:literal $(, $arg:expr)* $(,)?)) => { format!($text $(, $arg)*) };
    (@text { $($helper:tt)* }) => { { $($helper)* } };
    (@detail) => { None };
    (@detail { $($helper:tt)* }) => { { $($helper)* } };
    (@detail $d:tt) => { Some(catalogue!(@text $d)) };

    (@rows $e:ident $var:ident [$message:expr, $rows:expr]) => { $rows };
    (@rows $e:ident $var:ident { $level:ident $code:ident message $m:tt $($rest:tt)* }) => {
        vec![$crate::error::catalogue::Row {
            family: stringify!($e),
            variant: stringify!($var),
            sqlstate: ::pgrx::PgSqlErrorCode::$code,
            level: stringify!($level),
            message: catalogue!(@template $m),
        }]
    };
    (@template $text:literal) => { $text };
    (@template ($text:literal $(, $arg:expr)* $(,)?)) => { $text };
}

pub(crate) use catalogue;
