//! The integration catalog, one typed table: the providers an integration connects ([`Provider`]:
//! its wire name, its label on the dashboard, the OAuth scopes its account grants) and their
//! actions ([`Action`]: its provider, wire name, label and arguments, each with its type and
//! whether it is required).
//!
//! Every reader derives from it: the save-time checks of integration_call nodes
//! (`runtime::flows`), the dispatch of a node (`runtime::integrations`, which hands the action
//! to the REST call `edge::google::actions::run` makes of it, one arm per action), the consent
//! page's scopes and the dashboard's labels (`dashboard::integrations`), the operator's
//! `integration connect` and the OpenAPI description of an integration's `provider`.
//!
//! It lives in the domain, the lowest layer, because the store (which may import nothing else)
//! describes an integration's `provider` from it, and the edge, the runtime and the doors all
//! read it. The REST calls themselves stay at the edge; the compiler holds the two together,
//! since the edge's runner matches every [`Action`] without a catch-all.
//!
//! **Invariant:** the order of [`Provider::ALL`] and [`Action::ALL`] is the order the dashboard's
//! connect buttons and the `action_invalid` message list them in.

/// A third-party service an integration connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    GoogleCalendar,
    Gmail,
}

/// A provider is written as its wire name.
impl serde::Serialize for Provider {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a provider is named and what its account grants.
#[derive(Debug)]
pub struct ProviderSpec {
    /// The wire name: an integration's `provider` and an integration_call node's.
    pub name: &'static str,
    /// How the dashboard names it.
    pub label: &'static str,
    /// The OAuth scopes the consent page asks for (space-separated): who the account is, and
    /// the API its actions call.
    pub scope: &'static str,
}

const GOOGLE_CALENDAR: ProviderSpec = ProviderSpec {
    name: "google_calendar",
    label: "Google Calendar",
    scope: "openid email https://www.googleapis.com/auth/calendar",
};

const GMAIL: ProviderSpec = ProviderSpec {
    name: "gmail",
    label: "Gmail",
    scope: "openid email https://www.googleapis.com/auth/gmail.send",
};

impl Provider {
    /// Every provider, in the order the dashboard offers them.
    pub const ALL: [Provider; 2] = [Provider::GoogleCalendar, Provider::Gmail];

    pub const fn spec(self) -> &'static ProviderSpec {
        match self {
            Provider::GoogleCalendar => &GOOGLE_CALENDAR,
            Provider::Gmail => &GMAIL,
        }
    }

    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    pub const fn label(self) -> &'static str {
        self.spec().label
    }

    pub const fn scope(self) -> &'static str {
        self.spec().scope
    }

    /// The provider of a wire name.
    pub fn parse(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The label of a wire name; an unknown name as it is.
    pub fn label_of(name: &str) -> &str {
        Provider::parse(name).map_or(name, |p| p.label())
    }

    /// The provider's actions, in catalog order.
    pub fn actions(self) -> impl Iterator<Item = Action> {
        Action::ALL
            .into_iter()
            .filter(move |a| a.provider() == self)
    }

    /// The wire names as prose: "`google_calendar` or `gmail`".
    pub fn names_in_words() -> String {
        let names: Vec<String> = Provider::ALL
            .iter()
            .map(|p| format!("`{}`", p.name()))
            .collect();
        match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// The schema of a provider's wire name as an integration carries it: a string, described as
/// the catalog's names ("`google_calendar` or `gmail`.").
pub fn provider_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some(format!("{}.", Provider::names_in_words())))
        .build()
}

/// What an integration_call node asks its provider to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    CreateEvent,
    ListEvents,
    CheckAvailability,
    CancelEvent,
    SendEmail,
}

/// What an argument holds, as a node's `args_template` resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// Free text.
    Text,
    /// An ISO 8601 time; one without an offset is read in the action's zone.
    Time,
    /// An IANA time zone name.
    TimeZone,
    /// One email address, or a list of them.
    Addresses,
    /// `true` or `false`.
    Flag,
}

/// One argument of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// Absent or blank, the action is not sent (`missing_required_argument`).
    pub required: bool,
}

const fn required(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        required: true,
    }
}

const fn optional(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        required: false,
    }
}

/// One action of the catalog.
#[derive(Debug)]
pub struct ActionSpec {
    pub provider: Provider,
    /// The wire name: an integration_call node's `action`.
    pub name: &'static str,
    /// What it does, in a few words.
    pub label: &'static str,
    /// The arguments it reads; any other is ignored.
    pub args: &'static [Arg],
}

use ArgKind::{Addresses, Flag, Text, Time, TimeZone};

const CREATE_EVENT: ActionSpec = ActionSpec {
    provider: Provider::GoogleCalendar,
    name: "create_event",
    label: "Create an event",
    args: &[
        required("start_time", Time),
        required("end_time", Time),
        optional("time_zone", TimeZone),
        optional("calendar_id", Text),
        optional("attendees", Addresses),
        optional("summary", Text),
        optional("description", Text),
        optional("location", Text),
    ],
};

const LIST_EVENTS: ActionSpec = ActionSpec {
    provider: Provider::GoogleCalendar,
    name: "list_events",
    label: "List events",
    args: &[
        optional("start_time", Time),
        optional("end_time", Time),
        optional("time_zone", TimeZone),
        optional("calendar_id", Text),
        optional("query", Text),
    ],
};

const CHECK_AVAILABILITY: ActionSpec = ActionSpec {
    provider: Provider::GoogleCalendar,
    name: "check_availability",
    label: "Check availability",
    args: &[
        required("start_time", Time),
        required("end_time", Time),
        optional("time_zone", TimeZone),
        optional("calendar_id", Text),
    ],
};

const CANCEL_EVENT: ActionSpec = ActionSpec {
    provider: Provider::GoogleCalendar,
    name: "cancel_event",
    label: "Cancel an event",
    args: &[required("event_id", Text)],
};

const SEND_EMAIL: ActionSpec = ActionSpec {
    provider: Provider::Gmail,
    name: "send_email",
    label: "Send an email",
    args: &[
        required("to", Addresses),
        optional("cc", Addresses),
        optional("bcc", Addresses),
        optional("subject", Text),
        required("body", Text),
        optional("html", Flag),
    ],
};

impl Action {
    /// Every action, in catalog order.
    pub const ALL: [Action; 5] = [
        Action::CreateEvent,
        Action::ListEvents,
        Action::CheckAvailability,
        Action::CancelEvent,
        Action::SendEmail,
    ];

    pub const fn spec(self) -> &'static ActionSpec {
        match self {
            Action::CreateEvent => &CREATE_EVENT,
            Action::ListEvents => &LIST_EVENTS,
            Action::CheckAvailability => &CHECK_AVAILABILITY,
            Action::CancelEvent => &CANCEL_EVENT,
            Action::SendEmail => &SEND_EMAIL,
        }
    }

    pub const fn provider(self) -> Provider {
        self.spec().provider
    }

    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// `provider.action`, as the call's events and the `action_invalid` message write it.
    pub fn qualified(self) -> String {
        format!("{}.{}", self.provider().name(), self.name())
    }

    /// The action `action` of the provider named `provider`.
    pub fn find(provider: &str, action: &str) -> Option<Action> {
        Action::ALL
            .into_iter()
            .find(|a| a.provider().name() == provider && a.name() == action)
    }

    /// The arguments that must resolve to something, in the order they are checked.
    pub fn required_args(self) -> impl Iterator<Item = &'static Arg> {
        self.spec().args.iter().filter(|a| a.required)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_are_unique_and_every_action_is_found_by_its_names() {
        let providers: HashSet<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(providers.len(), Provider::ALL.len());
        let actions: HashSet<String> = Action::ALL.iter().map(|a| a.qualified()).collect();
        assert_eq!(actions.len(), Action::ALL.len());
        for action in Action::ALL {
            assert_eq!(
                Action::find(action.provider().name(), action.name()),
                Some(action)
            );
            let args: HashSet<&str> = action.spec().args.iter().map(|a| a.name).collect();
            assert_eq!(args.len(), action.spec().args.len(), "{action:?}");
        }
        for provider in Provider::ALL {
            assert_eq!(Provider::parse(provider.name()), Some(provider));
        }
        assert_eq!(Action::find("gmail", "create_event"), None);
        assert_eq!(Provider::parse("outlook"), None);
    }

    #[test]
    fn every_provider_has_actions_and_scopes_that_name_the_account() {
        for provider in Provider::ALL {
            assert!(provider.actions().next().is_some(), "{provider:?}");
            let scopes: Vec<&str> = provider.scope().split(' ').collect();
            // Who the account is (the userinfo endpoint), and the provider's own API.
            assert!(scopes.contains(&"openid") && scopes.contains(&"email"));
            assert!(
                scopes.iter().any(|s| s.starts_with("https://")),
                "{provider:?}"
            );
        }
        // Every action's provider is one the consent page can connect.
        for action in Action::ALL {
            assert!(Provider::ALL.contains(&action.provider()));
        }
        assert!(Provider::Gmail.scope().contains("gmail.send"));
        assert!(Provider::GoogleCalendar.scope().ends_with("/auth/calendar"));
    }

    #[test]
    fn the_catalog_reads_as_the_spec_lists_it() {
        let listed: Vec<String> = Action::ALL.iter().map(|a| a.qualified()).collect();
        assert_eq!(
            listed,
            [
                "google_calendar.create_event",
                "google_calendar.list_events",
                "google_calendar.check_availability",
                "google_calendar.cancel_event",
                "gmail.send_email",
            ]
        );
        assert_eq!(Provider::names_in_words(), "`google_calendar` or `gmail`");
        assert_eq!(Provider::label_of("gmail"), "Gmail");
        assert_eq!(Provider::label_of("other"), "other");
        let required: Vec<&str> = Action::CreateEvent
            .required_args()
            .map(|a| a.name)
            .collect();
        assert_eq!(required, ["start_time", "end_time"]);
        // cancel_event finds the calendar itself.
        assert!(
            Action::CancelEvent
                .spec()
                .args
                .iter()
                .all(|a| a.name != "calendar_id")
        );
    }
}
