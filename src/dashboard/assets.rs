//! The dashboard's files, embedded at build time: its stylesheet and the vendored htmx with
//! its server-sent-events extension and the uPlot chart library (licences in `assets/vendor/`).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Path, content type, bytes.
const FILES: [(&str, &str, &[u8]); 6] = [
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/app.js"),
    ),
    (
        "vendor/htmx/htmx.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/vendor/htmx/htmx.min.js"),
    ),
    (
        "vendor/htmx-ext-sse/sse.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/vendor/htmx-ext-sse/sse.min.js"),
    ),
    (
        "vendor/uplot/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "vendor/uplot/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.min.css"),
    ),
];

pub async fn serve(Path(path): Path<String>) -> Response {
    match FILES.iter().find(|(p, _, _)| *p == path) {
        Some((_, kind, bytes)) => {
            let mut response = bytes.into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            );
            response
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
