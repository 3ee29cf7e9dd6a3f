//! Reading columns of a row without panicking: a row that does not hold what the store wrote
//! (a column of another type, a NULL where a value belongs, a negative count) is a
//! [`StoreError::BadRow`], not a panic of the host.

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use crate::store::StoreError;

/// Column `column` of `row` (a row of `what`).
pub(super) fn col<'a, T: FromSql<'a>>(
    row: &'a Row,
    what: &'static str,
    column: usize,
) -> Result<T, StoreError> {
    row.try_get(column).map_err(|e| StoreError::BadRow {
        what,
        column,
        detail: e.to_string(),
    })
}

/// A BIGINT column holding a count, sequence number or time: never negative.
pub(super) fn unsigned<T: TryFrom<i64>>(
    row: &Row,
    what: &'static str,
    column: usize,
) -> Result<T, StoreError> {
    let v: i64 = col(row, what, column)?;
    T::try_from(v).map_err(|_| StoreError::BadRow {
        what,
        column,
        detail: format!("{v} is out of range"),
    })
}
