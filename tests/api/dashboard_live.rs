//! The live calls page: a call's changes reach an open page through server-sent events, and
//! the stream ends with the session.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::dashboard::Session;
use crate::sip_calls::{endpoint, sip_app};
use crate::sip_ua::Ua;

/// An open event stream of the dashboard.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(web: &Session, path: &str) -> Events {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", web.base))
            .header("cookie", web.cookie_header())
            .header("accept", "text/event-stream")
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        // Pages are compressed; the stream is not (each event goes out as it comes).
        assert!(!response.headers().contains_key("content-encoding"));
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next `calls` event's data; `None` when the stream ended.
    async fn next(&mut self, within: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if block.lines().any(|l| l == "event: calls") {
                    let data: Vec<&str> = block
                        .lines()
                        .filter_map(|l| l.strip_prefix("data: ").or(l.strip_prefix("data:")))
                        .collect();
                    return Some(data.join("\n"));
                }
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => panic!("no event within {within:?}"),
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(_) => return None,
            }
        }
    }

    /// Events until one whose data satisfies `wanted`; panics naming `what` if none has
    /// within 20 s.
    async fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let within = Duration::from_secs(20);
        let deadline = tokio::time::Instant::now() + within;
        let mut last = String::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            assert!(
                !left.is_zero(),
                "{what}: not within {within:?}; the last event: {last}"
            );
            // The stream sends the table again at least every second while a call is up.
            let data = match tokio::time::timeout(left, self.next(Duration::from_secs(10))).await {
                Ok(data) => data.expect("the stream goes on"),
                Err(_) => continue,
            };
            if wanted(&data) {
                return data;
            }
            last = data;
        }
    }
}

#[tokio::test]
async fn a_live_call_reaches_an_open_page_and_leaves_it_when_it_ends() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"name": "Front desk", "agent_speaks_first": false}),
        json!({}),
    )
    .await;
    let mut web = Session::new(&s.app);
    web.sign_in(&s.app.key).await;
    let page = web.get("/app/live").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("No calls under way"), "{}", page.text);
    assert!(page.text.contains("sse-connect=\"/app/live/events\""));

    let mut events = Events::open(&web, "/app/live/events").await;
    let first = events.next(Duration::from_secs(5)).await.unwrap();
    assert!(first.contains("No calls under way"), "{first}");

    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (_, ok) = ua.final_reply("INVITE", Duration::from_secs(5)).await;
    assert_eq!(ok.code, 200);
    ua.ack_2xx().await;
    let live = events
        .until("the call shows", |d| d.contains("in_progress"))
        .await;
    assert!(live.contains("Front desk"), "{live}");
    assert!(live.contains("inbound"), "{live}");
    // Its duration moves while it is up.
    let later = events.next(Duration::from_secs(5)).await.unwrap();
    assert!(later.contains("in_progress") && later != live, "{later}");

    ua.bye().await;
    let gone = events
        .until("the call leaves", |d| !d.contains("in_progress"))
        .await;
    assert!(gone.contains("No calls under way"), "{gone}");

    // Signing out ends the stream.
    let csrf = web.get("/app/live").await.hidden("csrf");
    web.post("/app/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(events.next(Duration::from_secs(5)).await, None);
    // And without a session there is no stream.
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(s.app.url("/app/live/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn what_is_said_on_a_live_call_reaches_the_open_page_as_each_turn_ends() {
    use crate::converse::{call_slug, conversing_app_with};
    use crate::vendor::{Reply, VendorServer};
    let vendor = VendorServer::start().await;
    vendor.transcript("I would like to book a table.", Duration::ZERO);
    vendor.reply(Reply::text(&["Of course, for how many?"]));
    let s = conversing_app_with(&vendor, |_| {}).await;
    let (_, _, slug) = endpoint(&s.app, json!({"vad_stop_secs": 0.5}), json!({})).await;
    let mut web = Session::new(&s.app);
    web.sign_in(&s.app.key).await;
    let mut events = Events::open(&web, "/app/live/events").await;
    let (ua, media) = call_slug(&s, &slug).await;
    // The caller speaks once the greeting has played.
    events
        .until("the greeting is said", |d| {
            d.contains("<strong>Agent: </strong>Hello, you have reached the front desk.</td>")
        })
        .await;
    ua.stream_tone(media, 75).await;
    let heard = events
        .until("the caller's turn shows", |d| {
            d.contains("I would like to book a table.")
        })
        .await;
    assert!(
        heard.contains("<strong>Caller: </strong>I would like to book a table."),
        "{heard}"
    );
    // The agent's answer shows while it is being said, then as its final turn.
    let saying = events
        .until("the answer shows", |d| {
            d.contains("Of course, for how many?")
        })
        .await;
    assert!(
        saying.contains("<strong>Agent: </strong>Of course, for how many? <span class=\"muted\">(speaking)</span>"),
        "{saying}"
    );
    let answered = events
        .until("the answer is said", |d| {
            d.contains("Of course, for how many?") && !d.contains("(speaking)")
        })
        .await;
    assert!(
        answered.contains("<strong>Agent: </strong>Of course, for how many?</td>"),
        "{answered}"
    );
    ua.bye().await;
    events
        .until("the call ends", |d| d.contains("No calls under way"))
        .await;
}

#[tokio::test]
async fn the_service_stops_while_a_live_page_is_open() {
    let app = crate::helpers::spawn_app().await;
    let mut web = Session::new(&app);
    web.sign_in(&app.key).await;
    let mut events = Events::open(&web, "/app/live/events").await;
    let first = events.next(Duration::from_secs(5)).await.unwrap();
    assert!(first.contains("No calls under way"), "{first}");
    // Draining the open connections does not wait for the stream: it ends with the service.
    let restarted = tokio::time::timeout(Duration::from_secs(10), app.restart(|_| {}))
        .await
        .expect("the service stops while a live page is open");
    assert_eq!(events.next(Duration::from_secs(5)).await, None);
    drop(restarted);
}
