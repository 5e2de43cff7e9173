//! libphonenumber's validity rules, compiled once per country calling code, and its reading
//! of a number written `+` and digits, compiled once per default country.
//!
//! `phonenumber::is_valid` looks up every pattern it tries in one shared cache: it locks a
//! mutex, hashes the pattern's text and walks an LRU list of 100 entries for each of the ten
//! or so patterns a number is tried against. Checking the rows of a million-contact CSV,
//! that was most of the time. Here each calling code's patterns are compiled into their own
//! regular expressions the first time a number of that code is checked and kept, and the
//! checks are the same as `phonenumber`'s own (`validator::source_for`, `number_type` and
//! `Descriptor::is_match`), so the answer is the same: the tests compare the two on numbers of
//! every calling code.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use phonenumber::NationalNumber;
use phonenumber::metadata::{DATABASE, Descriptor, Descriptors, Metadata};
use regex::{Regex, RegexBuilder};

/// Whether the number `national` of the calling code `code` is valid or, for ranges the
/// metadata does not list, fits its country's general pattern and a length its numbers have
/// (see `super::is_plausible`). `None` when this calling code's patterns could not be compiled
/// here, for the caller to ask `phonenumber` itself.
pub(super) fn plausible(code: u16, national: &NationalNumber) -> Option<bool> {
    let rules = rules_for(code)?;
    // `phonenumber::is_valid` reads the national number with its leading zeros, the region
    // lookup of `PhoneNumber::metadata` without them.
    let full = national.to_string();
    if rules.source(&full).is_some_and(|r| r.has_type(&full)) {
        return Some(true);
    }
    let value = national.value().to_string();
    Some(rules.source(&value).is_some_and(|r| r.fits(&value)))
}

/// `+digits` read as `phonenumber::parse(Some(home), "+digits")` reads it: the calling code
/// (the first of one to three digits the metadata knows) and the national number after it.
/// `None` leaves the reading to `phonenumber` where its other steps would change the digits:
/// the home country's international prefix right after the `+`, a national prefix the home
/// country strips, a leading 0, or too few or too many digits. The tests compare the two on
/// random numbers for every home country.
pub(super) fn read_international(
    digits: &str,
    home: phonenumber::country::Id,
) -> Option<(u16, NationalNumber)> {
    if !(3..=17).contains(&digits.len())
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || digits.starts_with('0')
    {
        return None;
    }
    let home = home_rules(home)?;
    if home
        .international_prefix
        .as_ref()
        .is_some_and(|p| p.is_match(digits))
    {
        return None;
    }
    let (code, national) = (1..=3).find_map(|len| {
        let code: u16 = digits[..len].parse().ok()?;
        DATABASE.by_code(&code).map(|_| (code, &digits[len..]))
    })?;
    let strips = home
        .prefix_for_parsing
        .as_ref()
        .is_some_and(|p| p.is_match(national))
        || home
            .national_prefix
            .as_deref()
            .is_some_and(|p| national.starts_with(p));
    if strips || !(2..=17).contains(&national.len()) {
        return None;
    }
    Some((code, national.parse().ok()?))
}

/// What reading a number takes from its home (default) country's metadata.
struct HomeRules {
    international_prefix: Option<Regex>,
    prefix_for_parsing: Option<Regex>,
    national_prefix: Option<String>,
}

/// The home rules of `home`, compiled on first use; `None` when the metadata has no such
/// country or one of its patterns does not compile.
fn home_rules(home: phonenumber::country::Id) -> Option<Arc<HomeRules>> {
    static HOMES: Compiled<phonenumber::country::Id, HomeRules> = OnceLock::new();
    compiled(&HOMES, home, || {
        let meta = DATABASE.by_id(home.as_ref())?;
        let pattern = |p: Option<&str>| match p {
            Some(p) => at_start(p).map(Some),
            None => Some(None),
        };
        Some(HomeRules {
            international_prefix: pattern(meta.international_prefix().map(|p| p.as_str()))?,
            prefix_for_parsing: pattern(meta.national_prefix_for_parsing().map(|p| p.as_str()))?,
            national_prefix: meta.national_prefix().map(str::to_owned),
        })
    })
}

/// The rules of `code`, compiled on first use; `None` when one of its patterns does not compile.
fn rules_for(code: u16) -> Option<Arc<CodeRules>> {
    static CODES: Compiled<u16, CodeRules> = OnceLock::new();
    compiled(&CODES, code, || CodeRules::compile(code))
}

/// Rules compiled once per key, and the keys whose rules could not be compiled.
type Compiled<K, V> = OnceLock<RwLock<HashMap<K, Option<Arc<V>>>>>;

/// The rules of `key` in `cache`, compiled by `compile` the first time.
fn compiled<K: std::hash::Hash + Eq, V>(
    cache: &Compiled<K, V>,
    key: K,
    compile: impl FnOnce() -> Option<V>,
) -> Option<Arc<V>> {
    let cache = cache.get_or_init(RwLock::default);
    if let Some(known) = cache.read().ok()?.get(&key) {
        return known.clone();
    }
    let rules = compile().map(Arc::new);
    cache.write().ok()?.insert(key, rules.clone());
    rules
}

/// The regions sharing a calling code, as `phonenumber::validator::source_for` picks among
/// them.
enum CodeRules {
    /// The code has no regions.
    None,
    /// The code's only region, or `None` when its identifier is not a country
    /// `phonenumber` knows (then no number of the code is valid).
    One(Option<RegionRules>),
    /// Several regions, tried in the metadata's order.
    Many(Vec<RegionRules>),
}

impl CodeRules {
    fn compile(code: u16) -> Option<Self> {
        let Some(regions) = DATABASE.region(&code) else {
            return Some(Self::None);
        };
        if let [region] = regions[..] {
            // A non-geographic entity ("001") is read with the code's first metadata.
            let meta = if region == "001" {
                DATABASE.by_code(&code).and_then(|m| m.into_iter().next())
            } else if region.parse::<phonenumber::country::Id>().is_ok() {
                DATABASE.by_id(region)
            } else {
                None
            };
            return Some(Self::One(match meta {
                Some(meta) => Some(RegionRules::compile(meta)?),
                None => None,
            }));
        }
        let mut many = Vec::with_capacity(regions.len());
        for region in regions {
            many.push(RegionRules::compile(DATABASE.by_id(region)?)?);
        }
        Some(Self::Many(many))
    }

    /// The region whose rules judge `national`.
    fn source(&self, national: &str) -> Option<&RegionRules> {
        match self {
            Self::None => None,
            Self::One(region) => region.as_ref(),
            Self::Many(regions) => regions.iter().find(|r| match &r.leading_digits {
                Some(leading) => leading.is_match(national),
                None => r.has_type(national),
            }),
        }
    }
}

/// Every number type `phonenumber::validator::number_type` tries, the common ones first (only
/// whether one matches counts here).
pub(super) fn number_types(d: &Descriptors) -> [Option<&Descriptor>; 10] {
    [
        d.mobile(),
        d.fixed_line(),
        d.toll_free(),
        d.premium_rate(),
        d.shared_cost(),
        d.voip(),
        d.personal_number(),
        d.pager(),
        d.uan(),
        d.voicemail(),
    ]
}

/// One region's patterns.
struct RegionRules {
    leading_digits: Option<Regex>,
    general: Pattern,
    /// The patterns of [`number_types`].
    types: Vec<Pattern>,
    /// The lengths of the general, fixed-line, mobile, toll-free and VoIP descriptions.
    lengths: Vec<u16>,
}

impl RegionRules {
    fn compile(meta: &Metadata) -> Option<Self> {
        let d = meta.descriptors();
        let types = number_types(d);
        let mut lengths: Vec<u16> = [d.fixed_line(), d.mobile(), d.toll_free(), d.voip()]
            .into_iter()
            .flatten()
            .chain(std::iter::once(d.general()))
            .flat_map(|desc| desc.possible_length().iter().copied())
            .collect();
        lengths.sort_unstable();
        lengths.dedup();
        Some(Self {
            leading_digits: match meta.leading_digits() {
                Some(pattern) => Some(at_start(pattern.as_str())?),
                None => None,
            },
            general: Pattern::compile(d.general())?,
            types: types
                .into_iter()
                .flatten()
                .map(Pattern::compile)
                .collect::<Option<_>>()?,
            lengths,
        })
    }

    /// `number_type(meta, national) != Type::Unknown`.
    fn has_type(&self, national: &str) -> bool {
        self.general.is_match(national) && self.types.iter().any(|t| t.is_match(national))
    }

    /// A length some description allows, and the general pattern.
    fn fits(&self, national: &str) -> bool {
        self.lengths.contains(&(national.len() as u16)) && self.general.is_match(national)
    }
}

/// One number description: `Descriptor::is_match`.
struct Pattern {
    regex: Regex,
    lengths: Vec<u16>,
}

impl Pattern {
    fn compile(desc: &Descriptor) -> Option<Self> {
        Some(Self {
            regex: at_start(desc.national_number().as_str())?,
            lengths: desc.possible_length().to_vec(),
        })
    }

    fn is_match(&self, national: &str) -> bool {
        (self.lengths.is_empty() || self.lengths.contains(&(national.len() as u16)))
            && self.regex.is_match(national)
    }
}

/// `pattern` as the metadata's cache compiles it (whitespace ignored), matching at the start
/// of the text only: `phonenumber` takes the leftmost match and asks that it start at 0, which
/// is the same as asking for a match that starts there. The line break ends a comment the
/// pattern might end with.
fn at_start(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&format!("^(?:{pattern}\n)"))
        .ignore_whitespace(true)
        .build()
        .ok()
}
