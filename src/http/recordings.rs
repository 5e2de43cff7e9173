//! Call recordings. A call's `recording_url` is `GET /calls/{id}/recording?sig=...`: permanent,
//! signed with HMAC-SHA256 under a key the service keeps in its store, and usable without an
//! API key. Each fetch answers 302 to a fresh link, `GET /recordings/{id}?expires=&nonce=&token=`,
//! valid for five minutes of the store's clock, which serves the stereo WAV (caller left, agent
//! right) with range requests. A missing or altered signature, or an expired link, gets the same
//! 403 whether or not the call exists.

use std::io::SeekFrom;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchboard_actors::ids::CallId;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::Q;
use super::state::AppState;
use crate::app::error::AppError;
use crate::domain::signing::{RecordingLinks, sign};
use crate::store::CallRecord;

/// How long a fetched download link works.
const LINK_SECS: i64 = 300;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(recording))
        .routes(routes!(download))
}

/// Checks `sig` (hex) against `message` in constant time.
fn verify(key: &[u8], message: &str, sig: Option<&str>) -> Result<(), ApiError> {
    match sig {
        Some(sig) if crate::domain::signing::verify(key, message.as_bytes(), sig) => Ok(()),
        _ => Err(ApiError::InvalidSignature),
    }
}

/// A call as the API shows it: with its `recording_url` when it has a recording.
pub fn present(state: &AppState, call: CallRecord) -> CallRecord {
    call.presented(state.recording_links())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SignedQuery {
    /// The signature from `recording_url`.
    sig: Option<String>,
}

/// Fetch a call's recording (authenticated by `sig`, no API key): 302 to a short-lived link
#[utoipa::path(get, path = "/calls/{id}/recording", operation_id = "getCallRecording", tag = "calls", security(()),
    params(("id" = String, Path), SignedQuery),
    responses((status = 302, description = "To a download link valid for five minutes"),
        (status = 403, description = "Missing or altered signature"),
        (status = 404, description = "The call has no recording (yet)")))]
async fn recording(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Q(q): Q<SignedQuery>,
) -> Result<Response, ApiError> {
    // A malformed id cannot carry a valid signature: the same answer as a wrong one.
    let id: CallId = id.parse().map_err(|_| ApiError::InvalidSignature)?;
    verify(
        &state.recording_key,
        &RecordingLinks::message(id),
        q.sig.as_deref(),
    )?;
    if !state.store.recording_ready(id).await? {
        return Err(ApiError::not_found("Recording"));
    }
    let expires = state.store.now().timestamp() + LINK_SECS;
    let nonce = hex::encode(rand::random::<[u8; 8]>());
    let token = sign(
        &state.recording_key,
        download_message(id, expires, &nonce).as_bytes(),
    );
    let location = format!(
        "{}/recordings/{id}?expires={expires}&nonce={nonce}&token={token}",
        state.public_url()
    );
    Ok((
        StatusCode::FOUND,
        [
            (header::LOCATION, location),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
    )
        .into_response())
}

fn download_message(id: CallId, expires: i64, nonce: &str) -> String {
    format!("download:{id}:{expires}:{nonce}")
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DownloadQuery {
    /// Unix time the link stops working.
    expires: Option<i64>,
    nonce: Option<String>,
    token: Option<String>,
}

/// Download a recording from a link handed out by `GET /calls/{id}/recording` (WAV, ranges)
#[utoipa::path(get, path = "/recordings/{id}", operation_id = "downloadRecording", tag = "calls", security(()),
    params(("id" = String, Path), DownloadQuery),
    responses((status = 200, description = "audio/wav"), (status = 206, description = "A byte range"),
        (status = 403, description = "Missing, altered or expired link"), (status = 416)))]
async fn download(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Q(q): Q<DownloadQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id: CallId = id.parse().map_err(|_| ApiError::InvalidSignature)?;
    let (Some(expires), Some(nonce)) = (q.expires, q.nonce.as_deref()) else {
        return Err(ApiError::InvalidSignature);
    };
    verify(
        &state.recording_key,
        &download_message(id, expires, nonce),
        q.token.as_deref(),
    )?;
    if expires < state.store.now().timestamp() {
        return Err(ApiError::InvalidSignature);
    }
    let path = crate::runtime::inbound::recording_path(&state.config.data_dir, id);
    let Ok(mut file) = tokio::fs::File::open(&path).await else {
        return Err(ApiError::not_found("Recording"));
    };
    let size = file
        .metadata()
        .await
        .map_err(|e| AppError::Internal(e.into()))?
        .len();
    let range = match headers.get(header::RANGE) {
        Some(value) => Some(parse_range(value, size)?),
        None => None,
    };
    let (start, end) = range.unwrap_or((0, size.saturating_sub(1)));
    let len = if size == 0 { 0 } else { end - start + 1 };
    file.seek(SeekFrom::Start(start))
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    let mut body = vec![0u8; len as usize];
    file.read_exact(&mut body)
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    let mut resp = Response::new(Body::from(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("audio/wav"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{id}.wav\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if range.is_some() {
        *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{size}")) {
            resp.headers_mut().insert(header::CONTENT_RANGE, v);
        }
    }
    Ok(resp)
}

/// One `bytes=` range (`a-b`, `a-` or `-n`) of a file of `size` bytes, as inclusive bounds.
fn parse_range(value: &HeaderValue, size: u64) -> Result<(u64, u64), ApiError> {
    let bad = ApiError::RangeNotSatisfiable { size };
    let text = value
        .to_str()
        .map_err(|_| ApiError::RangeNotSatisfiable { size })?;
    let spec = text.trim().strip_prefix("bytes=").ok_or(bad)?;
    let bad = || ApiError::RangeNotSatisfiable { size };
    if spec.contains(',') || size == 0 {
        return Err(bad());
    }
    let (a, b) = spec.split_once('-').ok_or_else(bad)?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        (size.saturating_sub(n), size - 1)
    } else {
        let start: u64 = a.parse().map_err(|_| bad())?;
        let end: u64 = if b.is_empty() {
            size - 1
        } else {
            b.parse::<u64>().map_err(|_| bad())?.min(size - 1)
        };
        (start, end)
    };
    if start > end || start >= size {
        return Err(bad());
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str, size: u64) -> Result<(u64, u64), ApiError> {
        parse_range(&HeaderValue::from_str(s).unwrap(), size)
    }

    #[test]
    fn ranges() {
        assert_eq!(r("bytes=0-99", 1000).unwrap(), (0, 99));
        assert_eq!(r("bytes=900-", 1000).unwrap(), (900, 999));
        assert_eq!(r("bytes=-100", 1000).unwrap(), (900, 999));
        assert_eq!(r("bytes=990-2000", 1000).unwrap(), (990, 999));
        for bad in [
            "bytes=1000-",
            "bytes=5-2",
            "items=0-1",
            "bytes=0-1,5-6",
            "bytes=-0",
            "bytes=x-",
        ] {
            assert!(r(bad, 1000).is_err(), "{bad}");
        }
    }
}
