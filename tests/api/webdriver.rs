//! A WebDriver client for the browser tests: Debian's headless Chromium through chromedriver
//! (started per browser), axe-core run in the page (`tests/browser/`, from npm), screenshots
//! under `target/screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

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

    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
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

    /// Signs in to `app` with `key` through the sign-in form, and waits for the first page.
    pub async fn sign_in(&self, app: &crate::helpers::TestApp, key: &str) {
        self.go(&app.url("/app/sign-in")).await;
        self.type_in("#key", key).await;
        self.click("form.card button").await;
        self.wait_url("/app/campaigns").await;
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
pub async fn check(browser: &Browser, name: &str) {
    browser.screenshot(name).await;
    let violations = browser.axe().await;
    assert!(violations.is_empty(), "{name}: {violations:#?}");
}
