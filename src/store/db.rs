//! The store's one way to its database: a query's text and the values bound to it
//! ([`Query`]), a row read back by column ([`Row`]), and what runs them ([`Exec`]).
//!
//! Every query of the store is built here and not with the driver's own builders, so the
//! store's logic names no driver type: a query is its SQL (`?` placeholders, values always
//! bound) and its values, kept as they were given ([`Param`]) and encoded only when the
//! query runs; a row is read by column name or position into any type the store reads
//! ([`Col`]). What differs between databases (how values are encoded, how placeholders are
//! written, how a script of several statements runs) is decided in this file, at the moment
//! a query meets a connection.

use sqlx::sqlite::{SqliteArguments, SqliteQueryResult, SqliteRow};
use sqlx::{Arguments, Decode, Encode, Sqlite, SqliteConnection, Type};

type BoxDynError = Box<dyn std::error::Error + Send + Sync>;

/// A value a query can be given: kept as it is until the query runs.
pub(crate) trait Param<'q>: Send {
    fn add_to_sqlite(&self, args: &mut SqliteArguments) -> Result<(), BoxDynError>;
}

impl<'q, T> Param<'q> for T
where
    T: Encode<'q, Sqlite> + Type<Sqlite> + Send + Sync + 'q,
{
    fn add_to_sqlite(&self, args: &mut SqliteArguments) -> Result<(), BoxDynError> {
        args.add(self)
    }
}

/// A type a column is read into (borrowing from the row for `'r`).
pub(crate) trait Col<'r>: Decode<'r, Sqlite> + Type<Sqlite> {}

impl<'r, T> Col<'r> for T where T: Decode<'r, Sqlite> + Type<Sqlite> {}

/// A type a column is read into that owns its value.
pub(crate) trait Owned: for<'r> Col<'r> {}

impl<T> Owned for T where T: for<'r> Col<'r> {}

/// A column's name or position.
pub(crate) trait Index: sqlx::ColumnIndex<SqliteRow> {}

impl<T> Index for T where T: sqlx::ColumnIndex<SqliteRow> {}

/// A query: its SQL and the values for its placeholders, in order.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct Query<'q> {
    text: String,
    params: Vec<Box<dyn Param<'q> + 'q>>,
    /// Kept prepared on its connection (the default), or prepared for this run only.
    persistent: bool,
}

/// A query of `text`, whose placeholders are `?`. Only constant column lists, table names
/// and placeholders are ever formatted into a query's text; values are always bound.
pub(crate) fn query<'q>(text: impl Into<String>) -> Query<'q> {
    Query {
        text: text.into(),
        params: Vec::new(),
        persistent: true,
    }
}

/// A row read back: its columns by name or position.
#[derive(Debug)]
pub(crate) struct Row(SqliteRow);

impl Row {
    /// Whether the row has a column named `name`.
    pub(crate) fn has_column(&self, name: &str) -> bool {
        use sqlx::Column;
        sqlx::Row::columns(&self.0).iter().any(|c| c.name() == name)
    }

    /// The name of the row's first column.
    pub(crate) fn first_column(&self) -> Option<&str> {
        use sqlx::Column;
        sqlx::Row::columns(&self.0).first().map(|c| c.name())
    }

    /// The column `index` (a name or a position) read as `T`.
    pub(crate) fn try_get<'r, T: Col<'r>, I: Index>(&'r self, index: I) -> Result<T, sqlx::Error> {
        sqlx::Row::try_get(&self.0, index)
    }
}

/// What a statement did: the rows it changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows
    }
}

impl From<SqliteQueryResult> for Done {
    fn from(r: SqliteQueryResult) -> Done {
        Done {
            rows: r.rows_affected(),
        }
    }
}

/// One result of a text of several statements (see [`Query::steps`]): a statement done, or a
/// row it returned.
pub(crate) enum Step {
    Done(Done),
    Row(Row),
}

/// Rows read as a value of several columns (a tuple of [`Col`]s, first column first).
pub(crate) trait FromRow: Sized {
    fn from_row(row: &Row) -> Result<Self, sqlx::Error>;
}

macro_rules! tuple_from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Owned),+> FromRow for ($($t,)+) {
            fn from_row(row: &Row) -> Result<Self, sqlx::Error> {
                Ok(($(row.try_get::<$t, _>($i)?,)+))
            }
        }
    };
}

tuple_from_row!(A 0);
tuple_from_row!(A 0, B 1);
tuple_from_row!(A 0, B 1, C 2);
tuple_from_row!(A 0, B 1, C 2, D 3);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4);

/// What a query runs on: a connection, or a transaction's.
pub trait Exec: Send {
    /// The SQLite connection the query runs on.
    fn sqlite(&mut self) -> &mut SqliteConnection;
}

impl Exec for SqliteConnection {
    fn sqlite(&mut self) -> &mut SqliteConnection {
        self
    }
}

impl Exec for sqlx::Transaction<'_, Sqlite> {
    fn sqlite(&mut self) -> &mut SqliteConnection {
        self
    }
}

impl<T: Exec + ?Sized> Exec for &mut T {
    fn sqlite(&mut self) -> &mut SqliteConnection {
        (**self).sqlite()
    }
}

impl Exec for Tx<'_> {
    fn sqlite(&mut self) -> &mut SqliteConnection {
        &mut self.0
    }
}

/// A write transaction: committed by [`Tx::commit`], rolled back if dropped before.
pub(crate) struct Tx<'c>(sqlx::Transaction<'c, Sqlite>);

/// Opens a write transaction on `conn`. SQLite takes its write lock at once (`BEGIN
/// IMMEDIATE`), so a transaction that reads before it writes cannot fail to upgrade when
/// another writer commits in between.
pub(crate) async fn begin_write<'c>(
    conn: &'c mut (impl Exec + ?Sized),
) -> Result<Tx<'c>, sqlx::Error> {
    use sqlx::Connection;
    Ok(Tx(conn.sqlite().begin_with("BEGIN IMMEDIATE").await?))
}

impl Tx<'_> {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.0.commit().await
    }
}

impl<'q> Query<'q> {
    /// Binds the next placeholder's value.
    pub(crate) fn bind<T: Param<'q> + 'q>(mut self, value: T) -> Self {
        self.params.push(Box::new(value));
        self
    }

    /// Whether the query's prepared statement is kept on its connection for the next run
    /// (the default) or dropped after this one (a text of which there are many).
    pub(crate) fn persistent(mut self, keep: bool) -> Self {
        self.persistent = keep;
        self
    }

    /// Appends `text` to the query's SQL.
    pub(crate) fn push(&mut self, text: impl std::fmt::Display) -> &mut Self {
        use std::fmt::Write;
        let _ = write!(self.text, "{text}");
        self
    }

    /// Appends a placeholder, bound to `value`.
    pub(crate) fn push_bind<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.text.push('?');
        self.params.push(Box::new(value));
        self
    }

    /// A list appended to the query, its items apart by `separator`.
    pub(crate) fn separated<'b>(&'b mut self, separator: &'static str) -> Separated<'b, 'q> {
        Separated {
            query: self,
            separator,
            first: true,
        }
    }

    /// The query as SQLite's driver runs it.
    pub(super) fn for_sqlite(
        self,
    ) -> Result<sqlx::query::Query<'static, Sqlite, SqliteArguments>, sqlx::Error> {
        let mut args = SqliteArguments::default();
        for p in &self.params {
            p.add_to_sqlite(&mut args).map_err(sqlx::Error::Encode)?;
        }
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(self.text), args).persistent(self.persistent))
    }

    /// Runs the query; what it changed.
    pub(crate) async fn execute(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Done, sqlx::Error> {
        Ok(self.for_sqlite()?.execute(conn.sqlite()).await?.into())
    }

    /// Every row the query returns.
    pub(crate) async fn fetch_all(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<Row>, sqlx::Error> {
        let rows = self.for_sqlite()?.fetch_all(conn.sqlite()).await?;
        Ok(rows.into_iter().map(Row).collect())
    }

    /// The query's first row; an error ([`sqlx::Error::RowNotFound`]) without one.
    pub(crate) async fn fetch_one(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Row, sqlx::Error> {
        self.fetch_optional(conn)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    /// The query's first row, if any.
    pub(crate) async fn fetch_optional(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<Row>, sqlx::Error> {
        Ok(self
            .for_sqlite()?
            .fetch_optional(conn.sqlite())
            .await?
            .map(Row))
    }

    /// The first column of the first row.
    pub(crate) async fn scalar<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<T, sqlx::Error> {
        Ok(self.fetch_one_as::<(T,)>(conn).await?.0)
    }

    /// The first column of the first row, if there is a row.
    pub(crate) async fn scalar_optional<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<T>, sqlx::Error> {
        Ok(self.fetch_optional_as::<(T,)>(conn).await?.map(|(v,)| v))
    }

    /// The first column of every row.
    pub(crate) async fn scalars<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<T>, sqlx::Error> {
        let rows = self.fetch_all_as::<(T,)>(conn).await?;
        Ok(rows.into_iter().map(|(v,)| v).collect())
    }

    /// Runs a text of several statements: what each statement did and each row it returned,
    /// in order, up to the first error, and that error.
    pub(crate) async fn steps(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> (Vec<Step>, Option<sqlx::Error>) {
        use futures_util::TryStreamExt;
        use sqlx::Executor;
        let query = match self.for_sqlite() {
            Ok(q) => q,
            Err(err) => return (Vec::new(), Some(err)),
        };
        let mut steps = Vec::new();
        let mut stream = conn.sqlite().fetch_many(query);
        loop {
            match stream.try_next().await {
                Ok(None) => return (steps, None),
                Ok(Some(sqlx::Either::Left(done))) => steps.push(Step::Done(done.into())),
                Ok(Some(sqlx::Either::Right(row))) => steps.push(Step::Row(Row(row))),
                Err(err) => return (steps, Some(err)),
            }
        }
    }

    /// Every row, each read as `T`.
    pub(crate) async fn fetch_all_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all(conn)
            .await?
            .iter()
            .map(T::from_row)
            .collect()
    }

    /// The first row read as `T`, if any.
    pub(crate) async fn fetch_optional_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<T>, sqlx::Error> {
        self.fetch_optional(conn)
            .await?
            .map(|r| T::from_row(&r))
            .transpose()
    }

    /// The first row read as `T`.
    pub(crate) async fn fetch_one_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<T, sqlx::Error> {
        T::from_row(&self.fetch_one(conn).await?)
    }
}

/// A list being appended to a query (see [`Query::separated`]).
pub(crate) struct Separated<'b, 'q> {
    query: &'b mut Query<'q>,
    separator: &'static str,
    first: bool,
}

impl<'q> Separated<'_, 'q> {
    fn next(&mut self) {
        if !self.first {
            self.query.text.push_str(self.separator);
        }
        self.first = false;
    }

    /// Appends `text` as the list's next item.
    pub(crate) fn push(&mut self, text: impl std::fmt::Display) -> &mut Self {
        self.next();
        self.query.push(text);
        self
    }

    /// Appends a placeholder bound to `value` as the list's next item.
    pub(crate) fn push_bind<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.next();
        self.query.push_bind(value);
        self
    }

    /// Appends a placeholder bound to `value` to the current item.
    pub(crate) fn push_bind_unseparated<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.query.push_bind(value);
        self
    }
}

impl From<SqliteRow> for Row {
    fn from(r: SqliteRow) -> Row {
        Row(r)
    }
}
