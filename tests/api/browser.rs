//! The dashboard in a real browser: Debian's headless Chromium driven over WebDriver
//! (chromedriver), each page checked with axe-core run in the page and saved as a screenshot
//! under `target/screenshots/`. `./scripts/test` installs Chromium, its driver and axe-core.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::call_detail::{app_mixed, direct_call};
use crate::calls::sim_app;
use crate::campaigns::{agent, number};
use crate::helpers::eventually;
use crate::sip_ua::free_sip_port;

/// One browser and its WebDriver session.
pub struct Browser {
    driver: tokio::process::Child,
    base: String,
    client: reqwest::Client,
}

fn manifest(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

impl Browser {
    /// Starts chromedriver and a headless Chromium `width` pixels wide.
    pub async fn start(width: u32) -> Browser {
        let port = free_sip_port();
        let driver = tokio::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver runs (./scripts/test installs Debian's chromium-driver)");
        let client = reqwest::Client::new();
        let status = format!("http://127.0.0.1:{port}/status");
        eventually(Duration::from_secs(15), "chromedriver is ready", || {
            let (client, status) = (client.clone(), status.clone());
            async move {
                let r = client.get(&status).send().await.ok()?;
                let v: Value = r.json().await.ok()?;
                (v["value"]["ready"] == true).then_some(())
            }
        })
        .await;
        let session: Value = client
            .post(format!("http://127.0.0.1:{port}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
                "goog:chromeOptions": {"binary": "/usr/bin/chromium",
                    // A phone's width is emulated: a window is never narrower than 500 pixels.
                    "mobileEmulation": {"deviceMetrics": {"width": width, "height": 844, "pixelRatio": 1}},
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--autoplay-policy=no-user-gesture-required", "--mute-audio",
                             format!("--window-size={},900", width.max(500))]}}}}))
            .send()
            .await
            .expect("a browser session")
            .json()
            .await
            .expect("a session answer");
        let id = session["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {session}"));
        let browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}/session/{id}"),
            client,
        };
        // Elements are looked for until they appear (a page may still be loading).
        browser
            .call(
                reqwest::Method::POST,
                "/timeouts",
                Some(json!({"implicit": 5000, "pageLoad": 15000})),
            )
            .await;
        browser
    }

    /// Waits until the page's address ends with `suffix` (a form's answer has loaded).
    pub async fn wait_url(&self, suffix: &str) {
        let mut last = String::new();
        for _ in 0..100 {
            last = self.url().await;
            if last.ends_with(suffix) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page stayed at {last}, not at ...{suffix}");
    }

    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .expect("webdriver")
            .json()
            .await
            .expect("json");
        match answer["value"].get("error") {
            Some(_) => Err(answer["value"].clone()),
            None => Ok(answer["value"].clone()),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("webdriver {path}: {e}"))
    }

    /// Waits until the element `css` holds `needle` (a submitted form's answer has replaced
    /// the page); its text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        self.wait_text_within(css, needle, Duration::from_secs(10))
            .await
    }

    /// [`Browser::wait_text`], waiting up to `within`.
    pub async fn wait_text_within(&self, css: &str, needle: &str, within: Duration) -> String {
        let mut last = String::new();
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let found = self
                .try_call(
                    reqwest::Method::POST,
                    "/element",
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            if let Some(id) = found.ok().and_then(|f| {
                f.as_object()
                    .and_then(|o| o.values().next())
                    .and_then(Value::as_str)
                    .map(String::from)
            }) && let Ok(text) = self
                .try_call(reqwest::Method::GET, &format!("/element/{id}/text"), None)
                .await
            {
                last = text.as_str().unwrap_or_default().to_string();
                if last.contains(needle) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never held {needle:?}; it held {last:?}");
    }

    pub async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn element(&self, css: &str) -> String {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_string()
    }

    pub async fn type_in(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    pub async fn run(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Saves what the page shows as `target/screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.call(reqwest::Method::GET, "/screenshot", None).await;
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        let dir = manifest("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }

    /// axe-core's serious and critical violations of the page, as `id: targets`.
    pub async fn axe(&self) -> Vec<String> {
        let source =
            std::fs::read_to_string(manifest("tests/browser/node_modules/axe-core/axe.min.js"))
                .expect("axe-core (./scripts/test installs it into tests/browser)");
        self.run(&format!("{source}\nreturn true;")).await;
        let script = "const done = arguments[arguments.length - 1];
            axe.run(document, {resultTypes: ['violations']})
              .then(r => done(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).join(', '))))
              .catch(e => done(['axe failed: ' + e]));";
        let found = self
            .call(
                reqwest::Method::POST,
                "/execute/async",
                Some(json!({"script": script, "args": []})),
            )
            .await;
        found
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Ends the session and the driver.
    pub async fn quit(mut self) {
        let _ = self.client.delete(&self.base).send().await;
        let _ = self.driver.kill().await;
    }
}

/// Checks the page with axe-core and saves its screenshot.
async fn check(browser: &Browser, name: &str) {
    browser.screenshot(name).await;
    let violations = browser.axe().await;
    assert!(violations.is_empty(), "{name}: {violations:#?}");
}

#[tokio::test]
async fn an_operator_signs_in_reads_a_call_and_manages_keys_in_a_real_browser() {
    let app = app_mixed(None, "busy=1", |_| {}).await;
    let call = direct_call(&app, "+972525550302").await;
    let browser = Browser::start(1280).await;
    browser.go(&app.url("/app/campaigns")).await;
    browser.wait_url("/app/sign-in").await;
    check(&browser, "sign-in").await;
    browser.type_in("#key", "sb_wrong").await;
    browser.click("form.card button").await;
    browser.wait_text(".field-error", "not valid").await;
    check(&browser, "sign-in-error").await;
    browser.type_in("#key", &app.key).await;
    browser.click("form.card button").await;
    browser.wait_url("/app/campaigns").await;
    // The session cookie is HttpOnly: the page's script cannot read it.
    assert_eq!(browser.run("return document.cookie;").await, "");
    check(&browser, "campaigns").await;

    browser.go(&app.url("/app/calls")).await;
    check(&browser, "calls").await;
    browser.click(&format!("a[href='/app/calls/{call}']")).await;
    browser.wait_url(&call).await;
    browser.wait_text("dl.facts", "+972525550302").await;
    check(&browser, "call").await;

    browser.go(&app.url("/app/live")).await;
    browser.wait_text("main", "No calls under way").await;
    // The page's event stream is open (htmx's extension, under the CSP).
    let open = browser
        .run("return !!document.querySelector('[sse-connect]')['htmx-internal-data'];")
        .await;
    assert_eq!(open, true);
    check(&browser, "live").await;

    browser.go(&app.url("/app/settings/keys")).await;
    check(&browser, "keys").await;
    browser.type_in("#name", "browser").await;
    browser.click("input[value='calls:read']").await;
    browser.click("form.card button").await;
    let secret = browser.wait_text("code.secret", "sb_").await;
    assert!(secret.starts_with("sb_"), "{secret}");
    check(&browser, "key-created").await;
    browser.click("button[aria-label='Revoke browser']").await;
    browser.wait_text("table tbody", "revoked").await;
    let api = app
        .send(reqwest::Method::GET, "/calls", Some(&secret), None)
        .await;
    assert_eq!(api.status, reqwest::StatusCode::UNAUTHORIZED);

    // Readable at phone width too.
    browser.quit().await;
    let phone = Browser::start(390).await;
    phone.go(&app.url("/app/sign-in")).await;
    phone.type_in("#key", &app.key).await;
    phone.click("form.card button").await;
    phone.wait_url("/app/campaigns").await;
    phone.go(&app.url(&format!("/app/calls/{call}"))).await;
    let overflow = phone
        .run("return document.documentElement.scrollWidth > window.innerWidth;")
        .await;
    assert_eq!(overflow, false, "the call page fits a phone's width");
    check(&phone, "call-phone").await;
    phone.quit().await;
}

#[tokio::test]
async fn a_call_s_recording_plays_and_a_transcript_turn_seeks_it() {
    use crate::converse::{call_slug, conversing_app_with};
    use crate::sip_calls::{ended_call, endpoint};
    use crate::vendor::{Reply, VendorServer};
    let vendor = VendorServer::start().await;
    vendor.transcript("I would like to book a table.", Duration::ZERO);
    vendor.reply(Reply::text(&["Of course."]));
    vendor.reply(Reply::text(&[
        "{\"summary\": \"The caller wanted a table.\", \"extracted\": {}}",
    ]));
    let s = conversing_app_with(&vendor, |_| {}).await;
    let (_, _, slug) = endpoint(&s.app, json!({"vad_stop_secs": 0.5}), json!({})).await;
    let (ua, media) = call_slug(&s, &slug).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    ua.stream_tone(media, 75).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    ua.bye().await;
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap().to_string();
    let detail = s.app.get(&format!("/calls/{id}")).await.body;
    assert!(detail["recording_url"].is_string(), "{detail}");
    let caller_ms = detail["transcript"][1]["start_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("a caller turn: {detail}"));
    assert!(caller_ms > 1000, "{detail}");

    let browser = Browser::start(1280).await;
    browser.go(&s.app.url("/app/sign-in")).await;
    browser.type_in("#key", &s.app.key).await;
    browser.click("form.card button").await;
    browser.wait_url("/app/campaigns").await;
    browser.go(&s.app.url(&format!("/app/calls/{id}"))).await;
    browser
        .wait_text("main", "I would like to book a table.")
        .await;
    // The player loads the recording through its signed link and plays: its time moves.
    let played = browser
        .call(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": "const done = arguments[arguments.length - 1];
                const p = document.getElementById('player'); p.muted = true;
                p.play().then(() => setTimeout(() => done(p.currentTime), 1000)).catch(e => done('failed: ' + e));",
                "args": []})),
        )
        .await;
    assert!(
        played.as_f64().is_some_and(|t| t > 0.2),
        "the player's time: {played}"
    );
    // The caller's turn's button seeks the recording to the turn.
    browser
        .run("document.getElementById('player').pause(); return true;")
        .await;
    browser
        .click("ol.transcript li:nth-of-type(2) button.seek")
        .await;
    let at = browser
        .run("return document.getElementById('player').currentTime;")
        .await
        .as_f64()
        .unwrap();
    assert!(
        (at - caller_ms as f64 / 1000.0).abs() < 0.3,
        "seeked to {at} s; the turn starts at {caller_ms} ms"
    );
    check(&browser, "call-recording").await;
    browser.quit().await;
}

#[tokio::test]
async fn an_operator_creates_launches_and_watches_a_campaign_in_a_real_browser() {
    let app = sim_app("answered=2,no_answer=1").await;
    let agent = agent(&app, Some(120)).await;
    let number = number(&app, "+972501230000", "active").await;
    let browser = Browser::start(1280).await;
    browser.go(&app.url("/app/sign-in")).await;
    browser.type_in("#key", &app.key).await;
    browser.click("form.card button").await;
    browser.wait_url("/app/campaigns").await;
    browser.type_in("#new-name", "Browser spring").await;
    browser.click("form.inline button").await;
    browser.wait_text("h1", "Browser spring").await;
    let path = browser.url().await;
    check(&browser, "campaign-new").await;

    // Settings: a value the rules refuse is named beside its field, and the form keeps the rest.
    browser
        .click(&format!("#agent_id option[value='{agent}']"))
        .await;
    browser
        .click(&format!("#from_phone_number_id option[value='{number}']"))
        .await;
    browser
        .type_in(
            "#calling_window",
            r#"{"timezone": "UTC", "start": "00:00", "end": "24:00"}"#,
        )
        .await;
    browser.type_in("#budget_cents", "lots").await;
    browser.click("form.settings button[type=submit]").await;
    browser
        .wait_text("#budget_cents-error", "positive integer")
        .await;
    check(&browser, "campaign-settings-error").await;
    browser
        .run("document.getElementById('budget_cents').value = ''; document.getElementById('max_in_flight').value = '3'; document.getElementById('max_attempts').value = '1'; return true;")
        .await;
    browser.click("form.settings button[type=submit]").await;
    browser.wait_text(".notice", "Saved").await;
    let id = path.rsplit('/').next().unwrap();
    let saved = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(saved.body["agent_id"], agent.as_str(), "{}", saved.text);
    assert_eq!(saved.body["max_in_flight"], 3);

    // Contacts from a CSV file, through the form (with its progress bar); the report lists the
    // invalid row.
    let csv = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        csv.path(),
        "phone_number,first_name\n+972501110001,Dana\n+972501110002,Eli\n+972501110003,Noa\nnope,X\n",
    )
    .unwrap();
    browser.go(&format!("{path}/contacts")).await;
    browser.type_in("#file", csv.path().to_str().unwrap()).await;
    browser.click("form.upload button").await;
    let report = browser.wait_text("#report", "enrolled").await;
    assert!(report.contains("3 enrolled"), "{report}");
    assert!(report.contains("1 invalid"), "{report}");
    browser.wait_text("#contacts tbody", "+972501110003").await;
    check(&browser, "campaign-upload").await;

    // Launched, the page follows the campaign without a reload until every contact is done.
    browser.go(&path).await;
    browser.click("form[action$='/launch'] button").await;
    browser.wait_text("#summary", "running").await;
    browser
        .run("document.body.dataset.loaded = 'once'; return true;")
        .await;
    browser
        .wait_text_within("#summary", "Every contact is done", Duration::from_secs(40))
        .await;
    assert_eq!(
        browser.run("return document.body.dataset.loaded;").await,
        "once",
        "the page was not reloaded"
    );
    let drawn = browser
        .run("return document.querySelectorAll('#timeline canvas').length;")
        .await;
    assert_eq!(drawn, 1, "the chart is drawn");
    check(&browser, "campaign-done").await;
    browser.go(&format!("{path}/contacts")).await;
    browser.wait_text("#contacts tbody", "+972501110003").await;
    check(&browser, "campaign-contacts").await;
    browser.quit().await;
}

#[tokio::test]
async fn an_operator_connects_an_integration_through_the_oauth_stand_in_in_a_real_browser() {
    use crate::google::{ACCOUNT, GoogleStandIn};
    let google = GoogleStandIn::start().await;
    let app = crate::helpers::spawn_app_with(|c| google.serve(c)).await;
    let browser = Browser::start(1280).await;
    browser.go(&app.url("/app/sign-in")).await;
    browser.type_in("#key", &app.key).await;
    browser.click("form.card button").await;
    browser.wait_url("/app/campaigns").await;
    browser.go(&app.url("/app/settings/integrations")).await;
    browser.wait_text("main", "No integrations yet.").await;
    check(&browser, "integrations").await;
    // To Google's consent page and back: the session cookie (SameSite=Strict) is not sent on
    // the way back from another site, and the handshake still finishes in this session.
    browser.click("form[action$='/connect'] button").await;
    let note = browser.wait_text(".notice", "Connected").await;
    assert_eq!(note, format!("Connected {ACCOUNT} (Google Calendar)."));
    assert!(
        browser
            .url()
            .await
            .contains("/app/settings/integrations?connected=")
    );
    browser.wait_text("table tbody", ACCOUNT).await;
    assert_eq!(google.codes(), (1, 0));
    check(&browser, "integrations-connected").await;

    browser.go(&app.url("/app/settings/webhooks")).await;
    browser.wait_text("main", "Signing secret").await;
    check(&browser, "webhooks").await;
    browser.click("form[action$='/reveal'] button").await;
    let secret = browser.wait_text("code.secret", "whsec_").await;
    assert_eq!(
        app.get("/webhook-signing-secret").await.body["secret"],
        secret.as_str()
    );
    browser.quit().await;
}
