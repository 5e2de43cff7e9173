//! SIP endpoint slugs: the user part of `sip:<slug>@host` that trunks dial.
//!
//! A slug is a prefix (1-12 lowercase letters, digits and single hyphens, not starting or ending
//! with a hyphen), a hyphen, and 24 random lowercase letters and digits (about 124 bits), so a
//! slug cannot be guessed from the endpoint's name. This module is the one place that rule
//! lives: the API checks prefixes and draws slugs here, and the SIP router refuses any slug that
//! could not have been drawn before it looks anything up.

use rand::Rng;

/// Characters of a slug's random part.
const RANDOM_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// Length of a slug's random part.
pub const RANDOM_LEN: usize = 24;
/// Longest prefix.
pub const PREFIX_MAX: usize = 12;

/// A slug prefix, as requested or derived from a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlugPrefix(String);

/// A requested prefix breaks the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a prefix of 1-{PREFIX_MAX} lowercase letters, digits and single hyphens, not starting or ending with a hyphen"
)]
pub struct PrefixError;

impl SlugPrefix {
    /// A requested prefix, as given.
    pub fn parse(prefix: &str) -> Result<Self, PrefixError> {
        let ok = !prefix.is_empty()
            && prefix.len() <= PREFIX_MAX
            && prefix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !prefix.starts_with('-')
            && !prefix.ends_with('-')
            && !prefix.contains("--");
        if ok {
            Ok(Self(prefix.to_owned()))
        } else {
            Err(PrefixError)
        }
    }

    /// A prefix derived from a name: its letters and digits, lowercased, runs of anything else
    /// as one hyphen, cut to 12 characters (`endpoint` when nothing is left).
    pub fn from_name(name: &str) -> Self {
        let mut out = String::new();
        for c in name.chars().flat_map(char::to_lowercase) {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                out.push(c);
            } else if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            if out.len() >= PREFIX_MAX {
                break;
            }
        }
        out.truncate(PREFIX_MAX);
        let trimmed = out.trim_end_matches('-');
        if trimmed.is_empty() {
            Self("endpoint".to_owned())
        } else {
            Self(trimmed.to_owned())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A slug that follows the rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SipSlug(String);

impl SipSlug {
    /// `prefix-` and 24 characters drawn from `rng` (the caller passes a CSPRNG-seeded one).
    pub fn generate(prefix: &SlugPrefix, rng: &mut impl Rng) -> Self {
        let random: String = (0..RANDOM_LEN)
            .map(|_| char::from(RANDOM_ALPHABET[rng.random_range(0..RANDOM_ALPHABET.len())]))
            .collect();
        Self(format!("{}-{random}", prefix.0))
    }

    /// A slug as dialled: `None` unless it could have been drawn by [`SipSlug::generate`].
    pub fn parse(slug: &str) -> Option<Self> {
        let (prefix, random) = slug.rsplit_once('-')?;
        SlugPrefix::parse(prefix).ok()?;
        (random.len() == RANDOM_LEN && random.bytes().all(|b| RANDOM_ALPHABET.contains(&b)))
            .then(|| Self(slug.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SipSlug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_derive_from_names() {
        let from = |name| SlugPrefix::from_name(name).0;
        assert_eq!(from("Front Desk"), "front-desk");
        assert_eq!(from("  Sales -- EU / West  "), "sales-eu-wes");
        assert_eq!(from("Ünïcode Line 2"), "n-code-line");
        assert_eq!(from("!!!"), "endpoint");
        assert_eq!(from("abcdefghijk-lmn"), "abcdefghijk");
        for name in [
            "Front Desk",
            "x",
            "Ünïcode Line 2",
            "!!!",
            "a-b-c-d-e-f-g-h",
        ] {
            let p = SlugPrefix::from_name(name);
            assert_eq!(SlugPrefix::parse(p.as_str()), Ok(p), "{name}");
        }
    }

    #[test]
    fn prefixes_given_are_checked() {
        for ok in ["a", "front-desk", "abc123", "a-b-c", "twelve-chars"] {
            assert!(SlugPrefix::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "Front",
            "thirteen-char",
            "a_b",
            "a b",
            "é",
        ] {
            assert_eq!(SlugPrefix::parse(bad), Err(PrefixError), "{bad}");
        }
    }

    #[test]
    fn slugs_carry_24_random_characters_and_parse_back() {
        let desk = SlugPrefix::parse("desk").unwrap();
        let a = SipSlug::generate(&desk, &mut rand::rng());
        let b = SipSlug::generate(&desk, &mut rand::rng());
        assert_ne!(a, b);
        let random = a.as_str().strip_prefix("desk-").unwrap();
        assert_eq!(random.len(), RANDOM_LEN);
        assert!(random.bytes().all(|c| RANDOM_ALPHABET.contains(&c)));
        assert_eq!(SipSlug::parse(a.as_str()), Some(a.clone()));
        let hyphens = SlugPrefix::parse("a-b-c").unwrap();
        let c = SipSlug::generate(&hyphens, &mut rand::rng());
        assert_eq!(SipSlug::parse(c.as_str()), Some(c));
    }

    #[test]
    fn slugs_that_could_not_have_been_drawn_do_not_parse() {
        for bad in [
            "",
            "desk",
            "desk-",
            "-abcdefghijklmnopqrstuvwx",
            "desk-abcdefghijklmnopqrstuvw",
            "desk-abcdefghijklmnopqrstuvwxy",
            "desk-ABCDEFGHIJKLMNOPQRSTUVWX",
            "Desk-abcdefghijklmnopqrstuvwx",
            "thirteen-char-abcdefghijklmnopqrstuvwx",
            "de--sk-abcdefghijklmnopqrstuvwx",
            "desk-abcdefghijklmnopqrstuv;x",
        ] {
            assert_eq!(SipSlug::parse(bad), None, "{bad}");
        }
    }
}
