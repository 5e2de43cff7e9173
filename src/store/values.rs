//! The values the store keeps the same way on both databases, whatever each calls them: a
//! moment ([`Ts`]), a JSON document ([`Json`]), and the types a column is read into ([`Col`]).

use chrono::{DateTime, Utc};
use sqlx::encode::IsNull;
use sqlx::postgres::{PgArgumentBuffer, PgRow};
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteRow};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type, TypeInfo, ValueRef};

type BoxDynError = Box<dyn std::error::Error + Send + Sync>;

/// A moment as the store keeps it: in SQLite, text of one fixed form (so that text order is
/// time order and a prefix of it is a time bucket); in PostgreSQL, a `timestamptz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ts(pub DateTime<Utc>);

impl std::fmt::Display for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
    }
}

impl Type<Sqlite> for Ts {
    fn type_info() -> sqlx::sqlite::SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Ts {
    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        Encode::<Sqlite>::encode(self.to_string(), buf)
    }
}

impl Type<Postgres> for Ts {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Ts {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        Encode::<Postgres>::encode_by_ref(&self.0, buf)
    }
}

/// A JSON document's text: in SQLite, text; in PostgreSQL, `jsonb`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Json(pub String);

impl Type<Sqlite> for Json {
    fn type_info() -> sqlx::sqlite::SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Json {
    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        Encode::<Sqlite>::encode(self.0.clone(), buf)
    }
}

impl Type<Postgres> for Json {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <sqlx::types::Json<()> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Json {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        // jsonb's binary form: its version (1), then the document's text.
        buf.push(1);
        buf.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }
}

/// A type a column is read into (borrowing from the row for `'r`), from either database.
pub(crate) trait Col<'r>: Sized {
    fn from_sqlite<I: Index>(row: &'r SqliteRow, index: I) -> Result<Self, sqlx::Error>;
    fn from_pg<I: Index>(row: &'r PgRow, index: I) -> Result<Self, sqlx::Error>;
}

macro_rules! plain_cols {
    ($($t:ty),+) => {$(
        impl<'r> Col<'r> for $t {
            fn from_sqlite<I: Index>(row: &'r SqliteRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_pg<I: Index>(row: &'r PgRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
        }
        impl<'r> Col<'r> for Option<$t> {
            fn from_sqlite<I: Index>(row: &'r SqliteRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_pg<I: Index>(row: &'r PgRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
        }
    )+};
}

plain_cols!(f64, bool, uuid::Uuid, DateTime<Utc>, Vec<u8>);

/// An integer column of PostgreSQL read as `i64`, whatever its width (a literal `1` is an
/// `integer` there, a count a `bigint`).
fn pg_int<I: Index>(row: &PgRow, index: I) -> Result<Option<i64>, sqlx::Error> {
    let raw = sqlx::Row::try_get_raw(row, index)?;
    match raw.type_info().name() {
        "INT4" => Ok(sqlx::Row::try_get::<Option<i32>, _>(row, index)?.map(i64::from)),
        "INT2" => Ok(sqlx::Row::try_get::<Option<i16>, _>(row, index)?.map(i64::from)),
        _ => sqlx::Row::try_get(row, index),
    }
}

/// The error of a NULL read into a type without one.
fn null_in<I: Index>(index: I) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: format!("{index:?}"),
        source: Box::new(sqlx::error::UnexpectedNullError),
    }
}

/// A text column of PostgreSQL, or a JSON one read as its text.
fn pg_text<I: Index>(row: &PgRow, index: I) -> Result<Option<String>, sqlx::Error> {
    let raw = sqlx::Row::try_get_raw(row, index)?;
    let name = raw.type_info().name().to_owned();
    if name != "JSONB" && name != "JSON" {
        return sqlx::Row::try_get(row, index);
    }
    if raw.is_null() {
        return Ok(None);
    }
    let value = <sqlx::types::JsonValue as Decode<Postgres>>::decode(raw).map_err(|source| {
        sqlx::Error::ColumnDecode {
            index: format!("{index:?}"),
            source,
        }
    })?;
    Ok(Some(value.to_string()))
}

/// A type a column is read into that owns its value.
pub(crate) trait Owned: for<'r> Col<'r> {}

impl<T> Owned for T where T: for<'r> Col<'r> {}

/// A column's name or position.
pub(crate) trait Index:
    sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow> + Copy + std::fmt::Debug
{
}

impl<T> Index for T where
    T: sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow> + Copy + std::fmt::Debug
{
}

/// Columns PostgreSQL reads through `$read` (a nullable value), SQLite as they are.
macro_rules! read_cols {
    ($($t:ty => $read:ident),+) => {$(
        impl<'r> Col<'r> for $t {
            fn from_sqlite<I: Index>(row: &'r SqliteRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_pg<I: Index>(row: &'r PgRow, index: I) -> Result<Self, sqlx::Error> {
                $read(row, index)?.ok_or_else(|| null_in(index))
            }
        }
        impl<'r> Col<'r> for Option<$t> {
            fn from_sqlite<I: Index>(row: &'r SqliteRow, index: I) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, index)
            }
            fn from_pg<I: Index>(row: &'r PgRow, index: I) -> Result<Self, sqlx::Error> {
                $read(row, index)
            }
        }
    )+};
}

read_cols!(i64 => pg_int, String => pg_text);
