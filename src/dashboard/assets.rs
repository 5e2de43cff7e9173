//! The dashboard's files, embedded at build time: its stylesheet and the vendored htmx with
//! its server-sent-events extension and the uPlot chart library (licences in `assets/vendor/`).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An embedded file, named by its path under `assets/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asset {
    AppCss,
    AppJs,
    Htmx,
    /// htmx's server-sent-events extension.
    HtmxSse,
    UplotJs,
    UplotCss,
}

impl Asset {
    /// Every embedded file.
    pub const ALL: [Asset; 6] = [
        Asset::AppCss,
        Asset::AppJs,
        Asset::Htmx,
        Asset::HtmxSse,
        Asset::UplotJs,
        Asset::UplotCss,
    ];

    /// Its path under `assets/` (and its address's under `/assets/`).
    pub const fn path(self) -> &'static str {
        self.file().0
    }

    /// Path, content type, bytes.
    const fn file(self) -> (&'static str, &'static str, &'static [u8]) {
        match self {
            Asset::AppCss => (
                "app.css",
                "text/css; charset=utf-8",
                include_bytes!("../../assets/app.css"),
            ),
            Asset::AppJs => (
                "app.js",
                "text/javascript; charset=utf-8",
                include_bytes!("../../assets/app.js"),
            ),
            Asset::Htmx => (
                "vendor/htmx/htmx.min.js",
                "text/javascript; charset=utf-8",
                include_bytes!("../../assets/vendor/htmx/htmx.min.js"),
            ),
            Asset::HtmxSse => (
                "vendor/htmx-ext-sse/sse.min.js",
                "text/javascript; charset=utf-8",
                include_bytes!("../../assets/vendor/htmx-ext-sse/sse.min.js"),
            ),
            Asset::UplotJs => (
                "vendor/uplot/uPlot.iife.min.js",
                "text/javascript; charset=utf-8",
                include_bytes!("../../assets/vendor/uplot/uPlot.iife.min.js"),
            ),
            Asset::UplotCss => (
                "vendor/uplot/uPlot.min.css",
                "text/css; charset=utf-8",
                include_bytes!("../../assets/vendor/uplot/uPlot.min.css"),
            ),
        }
    }
}

impl std::fmt::Display for Asset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.path())
    }
}

pub async fn serve(Path(path): Path<String>) -> Response {
    match Asset::ALL
        .iter()
        .map(|a| a.file())
        .find(|(p, _, _)| *p == path)
    {
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
