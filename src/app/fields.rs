//! Rules every body of an operation obeys: only writable fields, each read into its type with
//! the field at fault named; a partial update's absent, null or given fields.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::app::error::AppError;

/// Refuses keys outside `writable`, listing the writable fields.
pub fn check_fields(
    body: &Map<String, Value>,
    writable: &'static [&'static str],
) -> Result<(), AppError> {
    let unknown: Vec<String> = body
        .keys()
        .filter(|k| !writable.contains(&k.as_str()))
        .cloned()
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(AppError::UnknownFields {
            fields: unknown,
            writable,
        })
    }
}

/// Refuses an update that changes nothing: a body without one of the `writable` fields.
pub fn some_field(
    body: &Map<String, Value>,
    writable: &'static [&'static str],
) -> Result<(), AppError> {
    if body.is_empty() {
        return Err(AppError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            writable.join(", ")
        )));
    }
    Ok(())
}

/// Checks the keys against `writable`, then deserializes, naming the field at fault.
pub fn parse_fields<T: DeserializeOwned>(
    body: Map<String, Value>,
    writable: &'static [&'static str],
) -> Result<T, AppError> {
    check_fields(&body, writable)?;
    from_value(Value::Object(body))
}

/// Deserializes a value, naming the field at fault.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, AppError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        if path == "." || path.is_empty() {
            AppError::bad_request(first_upper(&inner))
        } else {
            AppError::invalid_field(path, inner.to_string())
        }
    })
}

fn first_upper(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// A field of a partial update: absent, explicitly null, or a value.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }

    /// `None` when absent; `Some(None)` when null.
    pub fn into_option(self) -> Option<Option<T>> {
        match self {
            Patch::Absent => None,
            Patch::Null => Some(None),
            Patch::Value(v) => Some(Some(v)),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

/// The fingerprint of a create request, for idempotency keys.
pub fn request_hash(body: &Map<String, Value>) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        Value::Object(body.clone()).to_string(),
    ))
}

/// `value`, or the refusal naming the missing `field`.
pub fn required<T>(value: Option<T>, field: &str) -> Result<T, AppError> {
    value.ok_or_else(|| AppError::missing_field(field))
}

/// What a delete answers: `{success: true, id}` when something was removed, else the
/// workspace has no such `resource`.
pub fn deleted(removed: bool, id: uuid::Uuid, resource: &'static str) -> Result<Value, AppError> {
    if !removed {
        return Err(AppError::not_found(resource));
    }
    Ok(serde_json::json!({"success": true, "id": id}))
}

/// A creation under an idempotency key: new, or the first one of a key repeated with the same
/// body.
pub enum Placed<T> {
    Created(T),
    Replayed(T),
}

/// What a repeated idempotency key answers: the first resource when the body is the same
/// (`first_hash` is `hash`), else a refusal.
pub fn replayed<T>(first: T, first_hash: Option<&str>, hash: &str) -> Result<Placed<T>, AppError> {
    if first_hash == Some(hash) {
        Ok(Placed::Replayed(first))
    } else {
        Err(AppError::bad_request(
            "idempotency_key was already used with a different request body",
        ))
    }
}
