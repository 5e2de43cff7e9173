//! Endpoint actors on tokio's paused clock, over an in-memory store that counts its writes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use switchboard_sip::acl::SourceFilter;

use super::*;
use crate::ids::{AgentId, SipEndpointId, WorkspaceId};
use crate::ports::{PortError, PortResult};

const SLUG: &str = "front-desk-abcdefghijklmnopqrstuvwx";

#[derive(Default)]
struct Book {
    endpoints: Mutex<HashMap<String, EndpointFacts>>,
    writes: Mutex<Vec<(SipEndpointId, DateTime<Utc>)>>,
    lookups: Mutex<usize>,
    failing: Mutex<bool>,
}

#[async_trait]
impl EndpointStore for Book {
    async fn endpoint(&self, slug: &str) -> PortResult<Option<EndpointFacts>> {
        *self.lookups.lock().unwrap() += 1;
        if *self.failing.lock().unwrap() {
            return Err(PortError::failed("endpoint", std::io::Error::other("down")));
        }
        Ok(self.endpoints.lock().unwrap().get(slug).cloned())
    }

    async fn last_call(&self, id: SipEndpointId, at: DateTime<Utc>) -> PortResult<()> {
        if *self.failing.lock().unwrap() {
            return Err(PortError::failed(
                "last_call",
                std::io::Error::other("down"),
            ));
        }
        self.writes.lock().unwrap().push((id, at));
        Ok(())
    }
}

fn facts(cap: Option<u32>, sources: SourceFilter) -> EndpointFacts {
    EndpointFacts {
        route: EndpointRoute {
            id: SipEndpointId::new(),
            workspace_id: WorkspaceId::new(),
            slug: SLUG.into(),
            agent_id: AgentId::new(),
        },
        sources,
        max_concurrent_calls: cap,
    }
}

async fn endpoints(endpoint: EndpointFacts) -> (Endpoints, Arc<Book>) {
    endpoints_with(endpoint, Duration::from_secs(5), Duration::from_secs(60)).await
}

async fn endpoints_with(
    endpoint: EndpointFacts,
    flush_every: Duration,
    idle_after: Duration,
) -> (Endpoints, Arc<Book>) {
    let book = Arc::new(Book::default());
    book.endpoints
        .lock()
        .unwrap()
        .insert(endpoint.route.slug.clone(), endpoint);
    let settings = EndpointSettings {
        flush_every,
        idle_after,
    };
    let endpoints = Endpoints::start(book.clone(), settings).await.unwrap();
    (endpoints, book)
}

fn caller() -> IpAddr {
    "192.0.2.10".parse().unwrap()
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).unwrap()
}

async fn seat(endpoints: &Endpoints) -> Seat {
    match endpoints.admit(SLUG, caller()).await {
        Admission::Seated { seat, .. } => seat,
        other => panic!("not seated: {other:?}"),
    }
}

/// What `endpoints` answers a call from `source` to `slug`, by name.
async fn answer_for(endpoints: &Endpoints, slug: &str, source: IpAddr) -> &'static str {
    match endpoints.admit(slug, source).await {
        Admission::Seated { .. } => "seated",
        Admission::Unknown => "unknown",
        Admission::Forbidden => "forbidden",
        Admission::Full => "full",
        Admission::Unavailable => "unavailable",
    }
}

async fn answer(endpoints: &Endpoints, source: IpAddr) -> &'static str {
    answer_for(endpoints, SLUG, source).await
}

/// Lets the actors take what was cast to them.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn the_cap_refuses_the_call_past_it_and_a_call_that_ends_frees_its_seat() {
    let (endpoints, book) = endpoints(facts(Some(2), SourceFilter::any())).await;
    let first = seat(&endpoints).await;
    let _second = seat(&endpoints).await;
    assert_eq!(answer(&endpoints, caller()).await, "full");
    drop(first);
    let _third = seat(&endpoints).await;
    assert_eq!(answer(&endpoints, caller()).await, "full");
    // The endpoint was read once, by the first INVITE: the others only found its actor.
    assert_eq!(*book.lookups.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_outside_the_filter_is_forbidden_and_an_unknown_slug_is_unknown() {
    let only = SourceFilter::only(vec!["198.51.100.0/24".parse().unwrap()]);
    let (endpoints, _) = endpoints(facts(None, only)).await;
    assert_eq!(answer(&endpoints, caller()).await, "forbidden");
    let inside: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(answer(&endpoints, inside).await, "seated");
    assert!(matches!(
        endpoints
            .admit("front-desk-zzzzzzzzzzzzzzzzzzzzzzzz", inside)
            .await,
        Admission::Unknown
    ));
}

#[tokio::test(start_paused = true)]
async fn last_call_at_is_written_once_per_batch_with_the_latest_start() {
    let endpoint = facts(None, SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint).await;
    // Ten calls start within a second, out of order.
    let mut seats = Vec::new();
    for i in [3, 1, 9, 4, 0, 7, 2, 8, 6, 5] {
        let s = seat(&endpoints).await;
        s.called(at(i));
        seats.push(s);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(book.writes.lock().unwrap().is_empty(), "written per call");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(*book.writes.lock().unwrap(), vec![(id, at(9))]);
    // Nothing new: nothing written.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(book.writes.lock().unwrap().len(), 1);
    // The next batch.
    seats[0].called(at(40));
    seats[1].called(at(41));
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        *book.writes.lock().unwrap(),
        vec![(id, at(9)), (id, at(41))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_is_tried_again_with_the_next_batch() {
    let endpoint = facts(None, SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint).await;
    let s = seat(&endpoints).await;
    *book.failing.lock().unwrap() = true;
    s.called(at(1));
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(book.writes.lock().unwrap().is_empty());
    *book.failing.lock().unwrap() = false;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(*book.writes.lock().unwrap(), vec![(id, at(1))]);
}

#[tokio::test(start_paused = true)]
async fn an_idle_actor_stops_and_writes_what_it_had_not() {
    let endpoint = facts(None, SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) =
        endpoints_with(endpoint, Duration::from_secs(3600), Duration::from_secs(60)).await;
    let s = seat(&endpoints).await;
    s.called(at(7));
    // A live call keeps it, however long.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(endpoints.running(), 1);
    drop(s);
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(endpoints.running(), 1);
    assert!(book.writes.lock().unwrap().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(endpoints.running(), 0);
    assert_eq!(*book.writes.lock().unwrap(), vec![(id, at(7))]);
    // The next INVITE starts it again.
    let _s = seat(&endpoints).await;
    assert_eq!(endpoints.running(), 1);
    assert_eq!(*book.lookups.lock().unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_endpoint_answers_unknown_at_once_and_its_actor_stops_with_its_last_call() {
    let endpoint = facts(Some(1), SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint.clone()).await;
    let live = seat(&endpoints).await;
    book.endpoints.lock().unwrap().remove(SLUG);
    endpoints.reload(id).await;
    assert_eq!(answer(&endpoints, caller()).await, "unknown");
    assert_eq!(endpoints.running(), 1, "stays while its call lasts");
    drop(live);
    settle().await;
    assert_eq!(endpoints.running(), 0);
    assert_eq!(answer(&endpoints, caller()).await, "unknown");
}

#[tokio::test(start_paused = true)]
async fn a_reactivated_endpoint_keeps_counting_the_calls_it_had() {
    let endpoint = facts(Some(1), SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint.clone()).await;
    let live = seat(&endpoints).await;
    let saved = book.endpoints.lock().unwrap().remove(SLUG).unwrap();
    endpoints.reload(id).await;
    book.endpoints.lock().unwrap().insert(SLUG.into(), saved);
    endpoints.reload(id).await;
    // Its one call still holds the only seat.
    assert_eq!(answer(&endpoints, caller()).await, "full");
    drop(live);
    let _next = seat(&endpoints).await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_cap_and_filter_apply_to_the_next_call() {
    let endpoint = facts(Some(1), SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint.clone()).await;
    let _live = seat(&endpoints).await;
    let mut changed = endpoint.clone();
    changed.max_concurrent_calls = None;
    changed.sources = SourceFilter::only(vec!["198.51.100.0/24".parse().unwrap()]);
    book.endpoints.lock().unwrap().insert(SLUG.into(), changed);
    endpoints.reload(id).await;
    assert_eq!(answer(&endpoints, caller()).await, "forbidden");
    let inside: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(answer(&endpoints, inside).await, "seated");
}

#[tokio::test(start_paused = true)]
async fn a_store_that_fails_answers_unavailable_and_a_change_read_while_down_is_read_again() {
    let endpoint = facts(None, SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints(endpoint).await;
    *book.failing.lock().unwrap() = true;
    assert_eq!(answer(&endpoints, caller()).await, "unavailable");
    *book.failing.lock().unwrap() = false;
    let _live = seat(&endpoints).await;
    // Deleted while the store is down: the actor cannot read it, and takes no call until it
    // can.
    book.endpoints.lock().unwrap().remove(SLUG);
    *book.failing.lock().unwrap() = true;
    endpoints.reload(id).await;
    assert_eq!(answer(&endpoints, caller()).await, "unavailable");
    *book.failing.lock().unwrap() = false;
    assert_eq!(answer(&endpoints, caller()).await, "unknown");
}

#[tokio::test(start_paused = true)]
async fn stopping_writes_every_actor_s_last_call() {
    let endpoint = facts(None, SourceFilter::any());
    let id = endpoint.route.id;
    let (endpoints, book) = endpoints_with(
        endpoint,
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .await;
    let s = seat(&endpoints).await;
    s.called(at(3));
    settle().await;
    endpoints.stop().await;
    assert_eq!(*book.writes.lock().unwrap(), vec![(id, at(3))]);
    assert_eq!(endpoints.running(), 0);
}
