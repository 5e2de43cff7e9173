//! Conversing agents on real calls: the project's user agent calls an endpoint whose agent
//! talks through the stand-in vendor (speech to text and a streamed chat model); the test
//! checks what the vendor was asked and what the caller heard.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard::config::VendorSettings;

use crate::dashboard::Session;
use crate::helpers::TestApp;
use crate::sip_calls::{SECS, SipApp, ended_call, endpoint, sip_app_with};
use crate::sip_recordings::{channels, fetch_recording};
use crate::sip_ua::{Ua, media_addr};
use crate::vendor::{Reply, VendorServer};

/// The service with its model and speech-to-text pointed at `vendor`.
async fn conversing_app(vendor: &VendorServer) -> SipApp {
    conversing_app_with(vendor, |_| {}).await
}

/// [`conversing_app`], configured further by `configure`.
pub async fn conversing_app_with(
    vendor: &VendorServer,
    configure: impl FnOnce(&mut switchboard::Config),
) -> SipApp {
    let settings = |model: &str| VendorSettings {
        base_url: vendor.base_url.clone(),
        api_key: Some("sk-test-secret".into()),
        model: model.into(),
    };
    sip_app_with(0, 100, None, |c| {
        c.llm = Some(settings("test-llm"));
        c.stt = Some(settings("test-stt"));
        configure(c);
    })
    .await
}

/// Calls an endpoint answering with `agent` and acknowledges the answer: the caller and the
/// server's media address.
async fn answered_call(s: &SipApp, agent: Value) -> (Ua, std::net::SocketAddr) {
    let (_, _, slug) = endpoint(&s.app, agent, json!({})).await;
    call_slug(s, &slug).await
}

/// Calls the endpoint `slug` and acknowledges the answer: the caller and the server's media
/// address.
pub async fn call_slug(s: &SipApp, slug: &str) -> (Ua, std::net::SocketAddr) {
    let mut ua = Ua::new(s.sip, slug).await;
    ua.invite_with_offer().await;
    let (_, ok) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(ok.code, 200, "{}", ok.text);
    ua.ack_2xx().await;
    let media = media_addr(ok.body());
    (ua, media)
}

/// The dashboard's live page as a signed-in viewer reads it: the latest turn of each call
/// under way, the agent's shown as said once its audio has played out. Tests wait on it for
/// what happens on a call (a greeting played, an answer said) instead of for a fixed time.
pub struct Live {
    url: String,
    cookie: String,
    client: reqwest::Client,
}

/// The latest turn of a call under way, as the live page shows it.
#[derive(Debug)]
struct Said {
    agent: bool,
    text: String,
    /// Still being said (or heard): not final yet.
    under_way: bool,
}

impl Live {
    /// Signs in to `app`'s dashboard with its key.
    pub async fn open(app: &TestApp) -> Live {
        let mut web = Session::new(app);
        web.sign_in(&app.key).await;
        Live {
            url: app.url("/app/live"),
            cookie: web.cookie_header(),
            client: reqwest::Client::new(),
        }
    }

    /// The latest turn of each call under way.
    async fn turns(&self) -> Vec<Said> {
        let page = self
            .client
            .get(&self.url)
            .header("cookie", &self.cookie)
            .send()
            .await
            .expect("the live page answers");
        assert_eq!(page.status(), reqwest::StatusCode::OK);
        let page = page.text().await.expect("the live page's text");
        page.split("<td class=\"said\">")
            .skip(1)
            .filter_map(|cell| {
                let cell = cell.split("</td>").next()?;
                let (who, text) = cell.strip_prefix("<strong>")?.split_once(": </strong>")?;
                let (text, under_way) = match text.split_once(" <span class=\"muted\">(speaking)") {
                    Some((text, _)) => (text, true),
                    None => (text, false),
                };
                Some(Said {
                    agent: who == "Agent",
                    text: text
                        .replace("&quot;", "\"")
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&amp;", "&"),
                    under_way,
                })
            })
            .collect()
    }

    /// Waits until the agent has said `text` to its end on a call under way (the turn is final:
    /// its audio has played out); panics naming it, and what the page showed, after 60 s.
    pub async fn agent_said(&self, text: &str) {
        self.shows(&format!("the agent has said {text:?}"), |t| {
            t.agent && !t.under_way && t.text == text
        })
        .await
    }

    async fn shows(&self, what: &str, wanted: impl Fn(&Said) -> bool) {
        // Generous: the suite runs its tests at once, and a caller's words recognised on a
        // loaded core (the local speech server) take several times what they take alone.
        let within = Duration::from_secs(60);
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let turns = self.turns().await;
            if turns.iter().any(&wanted) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not within {within:?}; the live page shows {turns:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// What the agent said on a call, by the transcript of its detail.
pub fn agent_lines(detail: &Value) -> Vec<&str> {
    detail["transcript"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["role"] == "agent")
        .filter_map(|t| t["text"].as_str())
        .collect()
}

/// The RMS level of `x` between `from` and `to` seconds (8 kHz).
pub fn level(x: &[i16], from: f64, to: f64) -> f64 {
    let (a, b) = ((from * 8000.0) as usize, (to * 8000.0) as usize);
    let part = &x[a.min(x.len())..b.min(x.len())];
    let energy: f64 = part.iter().map(|s| f64::from(*s).powi(2)).sum();
    (energy / part.len().max(1) as f64).sqrt()
}

#[tokio::test]
async fn a_caller_is_heard_understood_and_answered() {
    let vendor = VendorServer::start().await;
    vendor.transcript("I would like to book a visit for Tuesday.", Duration::ZERO);
    vendor.reply(Reply::text(&[
        "Sure, Tuesday works. ",
        "Shall I book ten in the morning?",
    ]));
    let s = conversing_app(&vendor).await;
    let live = Live::open(&s.app).await;
    let (mut ua, media) = answered_call(
        &s,
        json!({"greeting_message": "Hello.", "agent_speaks_first": true,
            "system_prompt": "You are the front desk of a clinic.", "vad_stop_secs": 0.5}),
    )
    .await;
    let answered = Instant::now();
    // The greeting plays; then the caller speaks for 1.5 s and stops.
    live.agent_said("Hello.").await;
    let spoke_from = answered.elapsed().as_secs_f64();
    ua.stream_tone(media, 75).await;
    let spoke_until = answered.elapsed().as_secs_f64();
    // The caller hangs up once the agent has said its answer.
    live.agent_said("Sure, Tuesday works. Shall I book ten in the morning?")
        .await;
    ua.bye().await;
    let (_, bye) = ua.final_reply("BYE", SECS).await;
    assert_eq!(bye.code, 200);

    // One utterance went to speech to text: the caller's 1.5 s with what the VAD kept around it.
    let uploads = vendor.uploads();
    assert_eq!(uploads.len(), 1, "one utterance");
    let secs = uploads[0].samples as f64 / f64::from(uploads[0].sample_rate);
    assert!((1.5..3.0).contains(&secs), "utterance of {secs} s");
    assert_eq!(
        uploads[0].fields.get("model").map(String::as_str),
        Some("test-stt")
    );
    // The model was asked once, with the agent's prompt, its greeting and the caller's words.
    let requests = vendor.conversation_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let body = &requests[0].1;
    let messages = body["messages"].as_array().expect("messages");
    let said = |role: &str| -> Vec<&str> {
        messages
            .iter()
            .filter(|m| m["role"] == role)
            .filter_map(|m| m["content"].as_str())
            .collect()
    };
    assert_eq!(said("system"), ["You are the front desk of a clinic."]);
    assert_eq!(said("assistant"), ["Hello."]);
    assert_eq!(said("user"), ["I would like to book a visit for Tuesday."]);
    let tools: Vec<&Value> = body["tools"].as_array().expect("tools").iter().collect();
    assert!(
        tools.iter().any(|t| t["function"]["name"] == "end_call"),
        "{tools:?}"
    );

    // The caller heard the answer after they stopped speaking.
    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["end_reason"], "caller_hangup", "{call}");
    let wav = fetch_recording(&s.app, &call).await;
    let (caller, agent) = channels(&wav, 8000);
    assert!(
        level(&caller, spoke_from + 0.2, spoke_until - 0.1) > 1000.0,
        "the caller's speech"
    );
    let answer = level(&agent, spoke_until + 0.5, spoke_until + 4.0);
    assert!(answer > 500.0, "the agent's answer is silent: {answer}");
}
/// Calls the agent, speaks 1.5 s once its greeting `greeting` has played, and hangs up once
/// the agent has said `reply` to its end; the agent's channel of the recording, and when the
/// caller stopped speaking (seconds after the answer).
async fn speak_once(s: &SipApp, agent: Value, greeting: &str, reply: &str) -> (Vec<i16>, f64) {
    let live = Live::open(&s.app).await;
    let (mut ua, media) = answered_call(s, agent).await;
    let answered = Instant::now();
    live.agent_said(greeting).await;
    ua.stream_tone(media, 75).await;
    let spoke_until = answered.elapsed().as_secs_f64();
    live.agent_said(reply).await;
    ua.bye().await;
    let _ = ua.final_reply("BYE", SECS).await;
    let call = ended_call(&s.app, 1).await;
    let wav = fetch_recording(&s.app, &call).await;
    (channels(&wav, 8000).1, spoke_until)
}
/// What the agent says when the model does not answer in time.
const APOLOGY: &str = "Sorry, I'm having trouble hearing you right now. Could you say that again?";

#[tokio::test]
async fn a_model_that_does_not_answer_in_time_gets_the_apology_said_and_recorded() {
    let vendor = VendorServer::start().await;
    vendor.transcript("Can I move my visit?", Duration::ZERO);
    // The model's answer would start after 5 s; the service waits 800 ms.
    vendor.reply(
        Reply::text(&["Of course, which day suits you?"])
            .delayed(Duration::from_secs(5), Duration::ZERO),
    );
    let s = conversing_app_with(&vendor, |c| {
        c.vendor_timeouts.first_byte = Duration::from_millis(800);
    })
    .await;
    let (agent, spoke_until) = speak_once(
        &s,
        json!({"greeting_message": "Hello.", "vad_stop_secs": 0.5}),
        "Hello.",
        APOLOGY,
    )
    .await;
    // The apology plays within about a second of the model's deadline, not after its answer.
    let apology = level(&agent, spoke_until + 0.6, spoke_until + 3.0);
    assert!(apology > 500.0, "no apology was said: {apology}");
    let call = ended_call(&s.app, 1).await;
    let detail = s
        .app
        .get(&format!("/calls/{}", call["id"].as_str().unwrap()))
        .await;
    let failures = detail.body["vendor_failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["vendor"], "chat_model");
    assert_eq!(failures[0]["error"], "the vendor did not answer in time");
    // Between half a second and 2.5 s after the caller stopped: the VAD's 0.5 s of silence,
    // the transcription, and the model's 800 ms.
    let at = failures[0]["at_ms"].as_u64().unwrap() as f64 / 1000.0;
    assert!(
        (spoke_until + 0.5..spoke_until + 2.5).contains(&at),
        "the timeout was recorded at {at} s, the caller stopped at {spoke_until:.2} s"
    );
    // The apology is in the transcript; nothing of the late answer was said.
    let said = agent_lines(&detail.body);
    assert_eq!(said, ["Hello.", APOLOGY]);
}

#[tokio::test]
async fn without_speech_to_text_the_caller_s_turn_is_on_the_record_unheard_and_says_why() {
    let s = crate::sip_calls::sip_app(0, 100).await;
    let live = Live::open(&s.app).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"greeting_message": "Hello.", "agent_speaks_first": true}),
        json!({}),
    )
    .await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    live.agent_said("Hello.").await;
    ua.stream_tone(media, 75).await;
    live.agent_said(switchboard_actors::turns::FALLBACK_LINE)
        .await;
    ua.bye().await;
    let (_, bye) = ua.final_reply("BYE", SECS).await;
    assert_eq!(bye.code, 200);
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap();
    let detail = s.app.get(&format!("/calls/{id}")).await.body;
    let caller: Vec<&Value> = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .collect();
    assert_eq!(caller.len(), 1, "{detail}");
    assert_eq!(caller[0]["text"], "");
    assert_eq!(caller[0]["unheard"], "no_speech_to_text");
    assert_eq!(detail["analysis_status"], "skipped");
    assert_eq!(detail["analysis_skipped"], "no_chat_model");
    // The dashboard says the same in words.
    let mut web = Session::new(&s.app);
    web.sign_in(&s.app.key).await;
    let page = web.get(&format!("/app/calls/{id}")).await;
    assert!(
        page.text
            .contains("Not heard: no speech to text is configured (--stt-url)."),
        "{}",
        page.text
    );
    assert!(
        page.text
            .contains("Not analysed: no chat model is configured (--llm-url)."),
        "{}",
        page.text
    );
    // The endpoint's slug is a credential: the page shows it masked.
    assert!(!page.text.contains(&slug), "{}", page.text);
    let (prefix, secret) = slug.rsplit_once('-').unwrap();
    let shown = format!("{prefix}-{}{}", "•".repeat(8), &secret[secret.len() - 4..]);
    assert!(page.text.contains(&shown), "{}", page.text);
    let list = web.get("/app/calls").await;
    assert!(!list.text.contains(&slug), "{}", list.text);
}
