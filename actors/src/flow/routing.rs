//! Where an integration_call node goes with its result, exactly as the spec routes it: a hard
//! failure takes `error_next_step_id`; otherwise the first `custom[]` branch (top to bottom)
//! whose JSONPath value equals its `equals` once both are stringified; else
//! `success_next_step_id`. Exactly one edge fires.

use serde_json::Value;

use super::graph::Branch;
use super::tokens::stringified;
pub use crate::agent::director::HardFailure;

/// Which edge fired, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Error(HardFailure),
    /// `custom[index]` matched.
    Custom(usize),
    Success,
}

impl Route {
    /// In words, for the path and the simulator.
    pub fn describe(&self) -> String {
        match self {
            Route::Error(why) => format!("error_next_step_id: {}", why.as_str()),
            Route::Custom(i) => format!("custom[{i}] matched"),
            Route::Success => "success_next_step_id: no custom branch matched".into(),
        }
    }
}

/// The edge an integration's result takes: the node and the rule. `error_next` absent on a
/// hard failure: the call has nowhere to go (`None`).
pub fn route(
    result: Result<&Value, HardFailure>,
    custom: &[Branch],
    success_next: usize,
    error_next: Option<usize>,
) -> (Option<usize>, Route) {
    let result = match result {
        Err(why) => return (error_next, Route::Error(why)),
        Ok(result) => result,
    };
    for (i, branch) in custom.iter().enumerate() {
        if let Some(found) = parse_path(&branch.path).and_then(|p| select(result, &p))
            && stringified(found) == stringified(&branch.equals)
        {
            return (Some(branch.next), Route::Custom(i));
        }
    }
    (Some(success_next), Route::Success)
}

/// One step of a JSONPath.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Reads the JSONPath subset this service evaluates: `$`, then `.key`, `['key']` or
/// `["key"]`, and `[index]`; `None` for anything else.
pub fn parse_path(path: &str) -> Option<Vec<Step>> {
    let rest = path.trim().strip_prefix('$')?;
    let chars: Vec<char> = rest.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                if end == start {
                    return None;
                }
                steps.push(Step::Key(chars[start..end].iter().collect()));
                i = end;
            }
            '[' => {
                let close = chars[i..].iter().position(|c| *c == ']')? + i;
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                let quoted = ['\'', '"'].iter().find_map(|q| {
                    inner
                        .strip_prefix(*q)
                        .and_then(|s| s.strip_suffix(*q))
                        .map(str::to_string)
                });
                match quoted {
                    Some(key) => steps.push(Step::Key(key)),
                    None => steps.push(Step::Index(inner.parse().ok()?)),
                }
                i = close + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

/// The value at `path` in `value`.
pub fn select<'a>(value: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get(k),
        Step::Index(i) => v.get(*i),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn branch(path: &str, equals: Value, next: usize) -> Branch {
        Branch {
            path: path.into(),
            equals,
            next,
        }
    }

    #[test]
    fn paths_are_read_and_followed() {
        let v = json!({"items": [{"status": "confirmed", "n": 3}], "a b": true});
        let at = |p: &str| select(&v, &parse_path(p).unwrap()).cloned();
        assert_eq!(at("$.items[0].status"), Some(json!("confirmed")));
        assert_eq!(at("$['items'][0]['n']"), Some(json!(3)));
        assert_eq!(at("$[\"a b\"]"), Some(json!(true)));
        assert_eq!(at("$"), Some(v.clone()));
        assert_eq!(at("$.items[4]"), None);
        for bad in ["items", "$..items", "$.items[*]", "$.", "$[x]", "$.a[0"] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_hard_failure_takes_the_error_edge_whatever_the_branches_say() {
        let custom = [branch("$", json!("x"), 7)];
        for why in [
            HardFailure::Provider(404),
            HardFailure::Provider(503),
            HardFailure::Timeout,
            HardFailure::Disconnected,
            HardFailure::ForeignIntegration,
            HardFailure::MissingArgument,
        ] {
            assert_eq!(
                route(Err(why), &custom, 1, Some(2)),
                (Some(2), Route::Error(why))
            );
        }
        // Without an error edge, nowhere to go.
        assert_eq!(
            route(Err(HardFailure::Timeout), &custom, 1, None),
            (None, Route::Error(HardFailure::Timeout))
        );
    }

    #[test]
    fn the_first_matching_branch_wins_top_to_bottom() {
        let result = json!({"status": "busy", "free": false});
        let custom = [
            branch("$.status", json!("free"), 10),
            branch("$.free", json!(false), 11),
            branch("$.status", json!("busy"), 12),
        ];
        assert_eq!(
            route(Ok(&result), &custom, 1, Some(2)),
            (Some(11), Route::Custom(1))
        );
    }

    #[test]
    fn equality_is_on_stringified_values() {
        let result = json!({"ok": true, "n": 3, "s": "3", "o": {"a": 1}, "nil": null});
        for (path, equals) in [
            ("$.ok", json!("true")),
            ("$.ok", json!(true)),
            ("$.n", json!("3")),
            ("$.s", json!(3)),
            ("$.o", json!("{\"a\":1}")),
            ("$.nil", json!("null")),
        ] {
            let custom = [branch(path, equals.clone(), 9)];
            assert_eq!(
                route(Ok(&result), &custom, 1, None).1,
                Route::Custom(0),
                "{path} = {equals}"
            );
        }
        for (path, equals) in [
            ("$.ok", json!("True")),
            ("$.n", json!(3.5)),
            ("$.gone", json!("null")),
        ] {
            let custom = [branch(path, equals.clone(), 9)];
            assert_eq!(
                route(Ok(&result), &custom, 1, None),
                (Some(1), Route::Success),
                "{path}"
            );
        }
    }

    #[test]
    fn no_match_takes_the_success_edge() {
        let result = json!([]);
        assert_eq!(
            route(Ok(&result), &[], 4, Some(5)),
            (Some(4), Route::Success)
        );
    }
}
