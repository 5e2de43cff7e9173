//! The dashboard over HTTP: signing in with a key, the session cookie and its limits, the
//! CSRF token of every write, the security headers, and workspace isolation.

use std::collections::HashMap;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::call_detail::{app_mixed, direct_call};
use crate::helpers::{TestApp, spawn_app};

/// A browser's view of the dashboard: its cookies, no redirects followed.
pub(crate) struct Session {
    pub(crate) base: String,
    client: reqwest::Client,
    cookies: HashMap<String, String>,
}

pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) text: String,
}

impl Page {
    pub(crate) fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The value of the first hidden input named `name`.
    pub(crate) fn hidden(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self
            .text
            .find(&marker)
            .unwrap_or_else(|| panic!("no {name} in {}", self.text))
            + marker.len();
        self.text[start..].split('"').next().unwrap().to_string()
    }
}

impl Session {
    pub(crate) fn new(app: &TestApp) -> Session {
        Session {
            base: app.url(""),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: HashMap::new(),
        }
    }

    pub(crate) fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub(crate) async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let response = request
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        for value in response.headers().get_all("set-cookie") {
            let text = value.to_str().unwrap();
            let (pair, _) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        Page {
            status: response.status(),
            headers: response.headers().clone(),
            text: response.text().await.unwrap(),
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(request).await
    }

    /// Posts a `multipart/form-data` form: `(name, file name, content)` in order.
    pub(crate) async fn post_multipart(
        &mut self,
        path: &str,
        parts: &[(&str, Option<&str>, &str)],
    ) -> Page {
        let boundary = "----switchboard-test-boundary";
        let mut body = String::new();
        for (name, file, content) in parts {
            body.push_str(&format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\""
            ));
            if let Some(file) = file {
                body.push_str(&format!("; filename=\"{file}\"\r\nContent-Type: text/csv"));
            }
            body.push_str(&format!("\r\n\r\n{content}\r\n"));
        }
        body.push_str(&format!("--{boundary}--\r\n"));
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        self.send(request).await
    }

    /// Signs in with `key`; the page it lands on.
    pub(crate) async fn sign_in(&mut self, key: &str) -> Page {
        let form = self.get("/app/sign-in").await;
        let token = form.hidden("sign_in");
        self.post("/app/sign-in", &[("sign_in", &token), ("key", key)])
            .await
    }
}

#[tokio::test]
async fn a_key_signs_in_to_a_session_cookie_the_page_never_sees() {
    let app = spawn_app().await;
    let mut s = Session::new(&app);
    // Not signed in: every page sends to the sign-in form.
    let r = s.get("/app/campaigns").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), "/app/sign-in");
    let form = s.get("/app/sign-in").await;
    assert_eq!(form.status, StatusCode::OK);
    let csp = form.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(form.headers["x-frame-options"], "DENY");
    assert!(
        form.text.contains("<label for=\"key\">API key</label>"),
        "{}",
        form.text
    );
    assert!(!form.text.contains("<script>"), "no inline script");

    let bad = s.sign_in("sb_not_a_real_key").await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert!(bad.text.contains("not valid"), "{}", bad.text);
    assert!(!s.cookies.contains_key("sb_session"));

    // A sign-in form not handed out to this browser is refused.
    let forged = s
        .post("/app/sign-in", &[("sign_in", "forged"), ("key", &app.key)])
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(!s.cookies.contains_key("sb_session"));

    let ok = s.sign_in(&app.key).await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.text);
    assert_eq!(ok.location(), "/app/campaigns");
    let set = ok
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("sb_session="))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/app"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains(&app.key), "the cookie is not the key");
    let page = s.get("/app/campaigns").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("No campaigns yet."), "{}", page.text);
    assert!(
        !page.text.contains(&app.key),
        "the key never reaches the page"
    );
    assert_eq!(page.headers["cache-control"], "no-store");

    // Signing out needs the session's CSRF token, and ends the session.
    let csrf = page.hidden("csrf");
    let refused = s.post("/app/sign-out", &[]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let out = s.post("/app/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(s.get("/app/campaigns").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn keys_are_created_once_shown_and_revoked_with_the_csrf_token() {
    let app = spawn_app().await;
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get("/app/settings/keys").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let csrf = page.hidden("csrf");

    // Without the token: refused, nothing created.
    let forged = s
        .post(
            "/app/settings/keys",
            &[("name", "ci"), ("scope", "calls:read")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.store.list_keys(app.workspace_id).await.unwrap().len(),
        1
    );

    // Errors in words beside their fields, the form kept.
    let wrong = s
        .post(
            "/app/settings/keys",
            &[("csrf", &csrf), ("name", "ci"), ("expires", "2001-01-01")],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert!(
        wrong.text.contains("Choose at least one scope."),
        "{}",
        wrong.text
    );
    assert!(
        wrong.text.contains("Choose a day after today."),
        "{}",
        wrong.text
    );
    assert!(wrong.text.contains("value=\"ci\""), "the name is kept");

    let created = s
        .post(
            "/app/settings/keys",
            &[
                ("csrf", &csrf),
                ("name", "ci"),
                ("scope", "calls:read"),
                ("scope", "agents:read"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let start =
        created.text.find("<code class=\"secret\">").unwrap() + "<code class=\"secret\">".len();
    let secret = created.text[start..].split('<').next().unwrap().to_string();
    assert!(secret.starts_with("sb_"), "{secret}");
    let api = app
        .send(reqwest::Method::GET, "/agents", Some(&secret), None)
        .await;
    assert_eq!(api.status, StatusCode::OK, "the new key works");
    // Shown once: the list shows its prefix only.
    let list = s.get("/app/settings/keys").await;
    assert!(!list.text.contains(&secret));

    let id = app
        .store
        .list_keys(app.workspace_id)
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.name == "ci")
        .unwrap()
        .id;
    let path = format!("/app/settings/keys/{id}/revoke");
    assert_eq!(s.post(&path, &[]).await.status, StatusCode::FORBIDDEN);
    let revoked = s.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(revoked.status, StatusCode::SEE_OTHER, "{}", revoked.text);
    let api = app
        .send(reqwest::Method::GET, "/agents", Some(&secret), None)
        .await;
    assert_eq!(
        api.status,
        StatusCode::UNAUTHORIZED,
        "the revoked key is refused"
    );

    // A key with fewer scopes may sign in, but not manage keys; revoking it ends its
    // session.
    let (_, narrow) = app
        .store
        .create_key(
            app.workspace_id,
            "narrow",
            &switchboard::domain::auth::Scopes::parse("calls:read").unwrap(),
            None,
        )
        .await
        .unwrap();
    let mut n = Session::new(&app);
    let landed = n.sign_in(&narrow).await;
    assert_eq!(
        landed.location(),
        "/app/calls",
        "a key lands on a page it may see"
    );
    assert_eq!(
        n.get("/app/settings/keys").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(n.get("/app/campaigns").await.status, StatusCode::FORBIDDEN);
    assert_eq!(n.get("/app/calls").await.status, StatusCode::OK);
    let narrow_id = app
        .store
        .list_keys(app.workspace_id)
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.name == "narrow")
        .unwrap()
        .id;
    s.post(
        &format!("/app/settings/keys/{narrow_id}/revoke"),
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(n.get("/app/calls").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_call_shows_its_facts_and_another_workspace_sees_a_404() {
    let app = app_mixed(None, "busy=1", |_| {}).await;
    let id = direct_call(&app, "+972525550302").await;
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let list = s.get("/app/calls").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert!(
        list.text.contains(&format!("/app/calls/{id}")),
        "{}",
        list.text
    );
    let filtered = s.get("/app/calls?status=queued").await;
    assert!(!filtered.text.contains(&format!("/app/calls/{id}")));
    assert_eq!(
        s.get("/app/calls?status=nonsense").await.status,
        StatusCode::BAD_REQUEST
    );
    let call = s.get(&format!("/app/calls/{id}")).await;
    assert_eq!(call.status, StatusCode::OK, "{}", call.text);
    assert!(call.text.contains("+972525550302"));
    assert!(call.text.contains("busy"), "{}", call.text);

    let (_, other_key) = app.other_workspace().await;
    let mut o = Session::new(&app);
    o.sign_in(&other_key).await;
    let theirs = o.get(&format!("/app/calls/{id}")).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    assert!(!theirs.text.contains("+972525550302"));
    assert!(!o.get("/app/calls").await.text.contains(&id));
    assert_eq!(
        o.get("/app/calls/not-an-id").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(o.get("/app/nowhere").await.status, StatusCode::NOT_FOUND);
    // The embedded assets are served.
    let css = o.get("/app/assets/app.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(css.headers["content-type"], "text/css; charset=utf-8");
    // An asset may be kept an hour; a page never.
    assert_eq!(css.headers["cache-control"], "public, max-age=3600");
    assert_eq!(
        o.get("/app/calls").await.headers["cache-control"],
        "no-store"
    );
    let htmx = o.get("/app/assets/vendor/htmx/htmx.min.js").await;
    assert_eq!(htmx.status, StatusCode::OK);
    // Pages and assets go compressed to a browser that takes gzip.
    for path in ["/app/calls", "/app/assets/vendor/htmx/htmx.min.js"] {
        let zipped = reqwest::Client::new()
            .get(app.url(path))
            .header("cookie", o.cookie_header())
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(zipped.status(), StatusCode::OK, "{path}");
        assert_eq!(zipped.headers()["content-encoding"], "gzip", "{path}");
    }
}

/// The session cookie of a sign-in's answer.
fn session_cookie(answer: &Page) -> String {
    answer
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("sb_session="))
        .expect("a session cookie")
}

#[tokio::test]
async fn a_session_ends_after_twelve_hours_and_its_cookie_is_secure_over_https() {
    let app = crate::helpers::spawn_app_with(|c| {
        c.public_url = Some("https://switchboard.example".into());
    })
    .await;
    let mut s = Session::new(&app);
    let signed = s.sign_in(&app.key).await;
    let cookie = session_cookie(&signed);
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("Max-Age=43200"), "{cookie}");
    assert_eq!(s.get("/app/calls").await.status, StatusCode::OK);
    // Still standing a minute before the twelve hours are up, gone after.
    app.clock
        .advance(std::time::Duration::from_secs(12 * 3600 - 60));
    assert_eq!(s.get("/app/calls").await.status, StatusCode::OK);
    app.clock.advance(std::time::Duration::from_secs(120));
    let gone = s.get("/app/calls").await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER);
    assert_eq!(gone.location(), "/app/sign-in");

    // Served over plain http, the cookie is not marked Secure (the browser would drop it).
    let plain = spawn_app().await;
    let mut p = Session::new(&plain);
    let cookie = session_cookie(&p.sign_in(&plain.key).await);
    assert!(!cookie.contains("Secure"), "{cookie}");
}
