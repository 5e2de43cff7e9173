//! The dashboard's addresses, declared once. A [`Url`] is a page, a part of one that htmx
//! loads, or a form's action, with its parameters typed; its axum route pattern is written
//! beside it, and both the link (`Display`, under [`BASE`]) and the router's registration
//! (`super::router`, one handler per [`Route`]) are made from that pattern, so a link cannot
//! name an address the router does not serve.

use std::fmt;

use axum::response::Redirect;
use switchboard_actors::ids::{AgentId, ApiKeyId, CallId, CampaignId, IntegrationId, ToolId};

use super::assets::Asset;

/// Where the service nests the dashboard's router.
pub const BASE: &str = "/app";

/// Declares `Url` (a variant per address, with its named parameters), `Route` (the same
/// variants without them) and each one's pattern, whose `{name}` segments are the parameters.
macro_rules! urls {
    ($(
        $(#[$doc:meta])*
        $name:ident $({ $($field:ident: $ty:ty),+ $(,)? })? => $pattern:literal,
    )+) => {
        /// An address of the dashboard, as a link, an htmx request or a form's action names it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Url {
            $($(#[$doc])* $name $({ $($field: $ty),+ })?,)+
        }

        /// The route a [`Url`] is served by.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Route {
            $($(#[$doc])* $name,)+
        }

        impl Route {
            /// Every route, in the order the router registers them.
            pub const ALL: &[Route] = &[$(Route::$name),+];

            /// The axum path pattern, relative to [`BASE`].
            pub const fn pattern(self) -> &'static str {
                match self {
                    $(Route::$name => $pattern,)+
                }
            }
        }

        impl Url {
            /// The route that serves this address.
            pub const fn route(&self) -> Route {
                match self {
                    $(Url::$name { .. } => Route::$name,)+
                }
            }

            /// The parameters by the names the pattern gives them.
            fn params(&self) -> Vec<(&'static str, &dyn fmt::Display)> {
                match self {
                    $(Url::$name $({ $($field),+ })? => {
                        vec![$($((stringify!($field), $field as &dyn fmt::Display)),+)?]
                    })+
                }
            }
        }
    };
}

urls! {
    /// The landing address: it sends the viewer to the first page their key may see.
    Home => "/",
    SignIn => "/sign-in",
    SignOut => "/sign-out",
    /// The campaigns list (GET) and the form that creates one (POST).
    Campaigns => "/campaigns",
    Campaign { id: CampaignId } => "/campaigns/{id}",
    /// The progress part, reloaded while the campaign is live.
    CampaignSummary { id: CampaignId } => "/campaigns/{id}/summary",
    CampaignChart { id: CampaignId } => "/campaigns/{id}/chart",
    CampaignSettings { id: CampaignId } => "/campaigns/{id}/settings",
    /// The contacts (GET) and the CSV upload (POST).
    CampaignContacts { id: CampaignId } => "/campaigns/{id}/contacts",
    /// Launch, resume, pause or stop (`command` is the command's path segment).
    CampaignCommand { id: CampaignId, command: &'static str } => "/campaigns/{id}/{command}",
    Calls => "/calls",
    Call { id: CallId } => "/calls/{id}",
    Agents => "/agents",
    Agent { id: AgentId } => "/agents/{id}",
    AgentSimulate { id: AgentId } => "/agents/{id}/simulate",
    AgentCallerId { id: AgentId } => "/agents/{id}/caller-id",
    Tools => "/tools",
    ToolTest { id: ToolId } => "/tools/{id}/test",
    /// The SIP endpoints (GET) and the form that creates one (POST).
    SipEndpoints => "/sip-endpoints",
    Numbers => "/numbers",
    DoNotCall => "/do-not-call",
    Dispositions => "/dispositions",
    Leads => "/leads",
    Billing => "/billing",
    Live => "/live",
    /// The live page's server-sent events.
    LiveEvents => "/live/events",
    /// The API keys (GET) and the form that creates one (POST).
    Keys => "/settings/keys",
    KeyRevoke { id: ApiKeyId } => "/settings/keys/{id}/revoke",
    Webhooks => "/settings/webhooks",
    WebhooksReveal => "/settings/webhooks/reveal",
    WebhooksRotate => "/settings/webhooks/rotate",
    Integrations => "/settings/integrations",
    IntegrationsConnect => "/settings/integrations/connect",
    /// Where the provider sends the browser back (no session: SameSite=Strict does not follow).
    IntegrationsCallback => "/settings/integrations/callback",
    IntegrationsFinish => "/settings/integrations/finish",
    IntegrationDisconnect { id: IntegrationId } => "/settings/integrations/{id}/disconnect",
    /// An embedded file.
    Asset { path: Asset } => "/assets/{*path}",
}

impl Url {
    /// The address with a query string (`query` already encoded).
    pub fn with_query(self, query: &str) -> String {
        format!("{self}?{query}")
    }

    /// A `303 See Other` to this address.
    pub fn redirect(self) -> Redirect {
        Redirect::to(&self.to_string())
    }

    /// An embedded file's address.
    pub const fn asset(path: Asset) -> Url {
        Url::Asset { path }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(BASE)?;
        let params = self.params();
        // A nested router's `/` is the nest's own address (`/app`, not `/app/`).
        let mut rest = match self.route().pattern() {
            "/" => "",
            pattern => pattern,
        };
        while let Some(open) = rest.find('{') {
            f.write_str(&rest[..open])?;
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
            let name = rest[open + 1..close].trim_start_matches('*');
            if let Some((_, value)) = params.iter().find(|(n, _)| *n == name) {
                value.fmt(f)?;
            }
            rest = rest.get(close + 1..).unwrap_or_default();
        }
        f.write_str(rest)
    }
}

impl From<Url> for String {
    fn from(url: Url) -> String {
        url.to_string()
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use axum::routing::any;
    use tower::ServiceExt;
    use uuid::Uuid;

    use super::*;

    /// One address of every route.
    fn examples() -> Vec<Url> {
        let id = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001);
        let mut all = vec![
            Url::Home,
            Url::SignIn,
            Url::SignOut,
            Url::Campaigns,
            Url::Campaign { id: id.into() },
            Url::CampaignSummary { id: id.into() },
            Url::CampaignChart { id: id.into() },
            Url::CampaignSettings { id: id.into() },
            Url::CampaignContacts { id: id.into() },
            Url::Calls,
            Url::Call { id: id.into() },
            Url::Agents,
            Url::Agent { id: id.into() },
            Url::AgentSimulate { id: id.into() },
            Url::AgentCallerId { id: id.into() },
            Url::Tools,
            Url::ToolTest { id: id.into() },
            Url::SipEndpoints,
            Url::Numbers,
            Url::DoNotCall,
            Url::Dispositions,
            Url::Leads,
            Url::Billing,
            Url::Live,
            Url::LiveEvents,
            Url::Keys,
            Url::KeyRevoke { id: id.into() },
            Url::Webhooks,
            Url::WebhooksReveal,
            Url::WebhooksRotate,
            Url::Integrations,
            Url::IntegrationsConnect,
            Url::IntegrationsCallback,
            Url::IntegrationsFinish,
            Url::IntegrationDisconnect { id: id.into() },
        ];
        for command in ["launch", "resume", "pause", "stop"] {
            all.push(Url::CampaignCommand {
                id: id.into(),
                command,
            });
        }
        all.extend(Asset::ALL.iter().map(|a| Url::asset(*a)));
        all
    }

    /// The `{name}` segments of a pattern, without a catch-all's `*`.
    fn placeholders(pattern: &str) -> Vec<&str> {
        pattern
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .map(|s| s.trim_start_matches('*'))
            .collect()
    }

    #[test]
    fn every_route_has_an_example() {
        let shown: Vec<Route> = examples().iter().map(Url::route).collect();
        for route in Route::ALL {
            assert!(shown.contains(route), "{route:?} has no example");
        }
    }

    #[test]
    fn a_pattern_names_exactly_its_variant_s_parameters() {
        for url in examples() {
            let names: Vec<&str> = url.params().iter().map(|(n, _)| *n).collect();
            assert_eq!(placeholders(url.route().pattern()), names, "{url:?}");
        }
    }

    #[test]
    fn addresses_are_the_dashboard_s_hrefs() {
        let id = Uuid::from_u128(7);
        assert_eq!(Url::Home.to_string(), "/app");
        assert_eq!(Url::Calls.to_string(), "/app/calls");
        assert_eq!(
            Url::CampaignCommand {
                id: id.into(),
                command: "stop"
            }
            .to_string(),
            format!("/app/campaigns/{id}/stop")
        );
        assert_eq!(
            Url::KeyRevoke { id: id.into() }.to_string(),
            format!("/app/settings/keys/{id}/revoke")
        );
        assert_eq!(
            Url::asset(Asset::Htmx).to_string(),
            "/app/assets/vendor/htmx/htmx.min.js"
        );
        assert_eq!(
            Url::Calls.with_query("agent=1"),
            "/app/calls?agent=1".to_owned()
        );
    }

    /// Each address, requested of a router with the table's patterns nested as the service
    /// nests the dashboard, reaches its own route (not a neighbour's, nor none).
    #[tokio::test]
    async fn every_address_reaches_its_own_route() {
        let table = Route::ALL.iter().fold(Router::new(), |router, route| {
            let pattern = route.pattern();
            router.route(pattern, any(move || async move { pattern }))
        });
        let service = Router::new().nest(BASE, table);
        for url in examples() {
            let request = Request::get(url.to_string()).body(Body::empty());
            let answer = service
                .clone()
                .oneshot(request.expect("a request"))
                .await
                .expect("an answer");
            let body = to_bytes(answer.into_body(), 1024).await.expect("a body");
            assert_eq!(body, url.route().pattern(), "{url}");
        }
    }

    #[test]
    fn the_dashboard_s_router_registers_every_route() {
        // axum refuses a pattern it cannot serve, or two that overlap, as the router is built.
        let _ = super::super::router();
    }
}
