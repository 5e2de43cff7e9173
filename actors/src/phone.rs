//! Phone numbers in E.164. Input may be international (`+972 50-123-4567`) or national
//! (`050-123-4567`, read in the workspace's default country); both parse to the same number.

use std::fmt;

use serde::{Deserialize, Serialize};

mod rules;

/// A valid phone number, held in E.164 form (`+972501234567`). It serializes as that string and
/// deserializes only through [`PhoneNumber::parse`], so serde cannot build an invalid one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PhoneNumber(String);

impl TryFrom<String> for PhoneNumber {
    type Error = PhoneError;

    /// Reads the serialized form, E.164: a national form has no country to be read in.
    fn try_from(value: String) -> Result<Self, PhoneError> {
        if !value.starts_with('+') {
            return Err(PhoneError::Unparseable { input: value });
        }
        // An international number ignores the default country.
        Self::parse(&value, phonenumber::country::Id::US)
    }
}

impl From<PhoneNumber> for String {
    fn from(number: PhoneNumber) -> Self {
        number.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhoneError {
    #[error("`{input}` is not a phone number")]
    Unparseable { input: String },
    #[error("`{input}` is not a valid phone number")]
    Invalid { input: String },
    #[error("`{code}` is not an ISO 3166 country code")]
    UnknownCountry { code: String },
}

/// Parse an ISO 3166-1 alpha-2 country code (`IL`, `us`).
pub fn parse_country(code: &str) -> Result<phonenumber::country::Id, PhoneError> {
    code.trim()
        .to_ascii_uppercase()
        .parse()
        .map_err(|_| PhoneError::UnknownCountry {
            code: code.to_owned(),
        })
}

impl PhoneNumber {
    /// Parses `input` in any common format; national forms are read in `default_country`.
    /// The number must be valid for its country (libphonenumber's rules). Only digits, a
    /// leading `+` and the separators people write (spaces, `-`, `.`, `/`, parentheses) are
    /// taken: letters, extensions and dialling symbols (`*`, `#`) are refused rather than
    /// dropped, so what is stored is what was meant.
    pub fn parse(
        input: &str,
        default_country: phonenumber::country::Id,
    ) -> Result<Self, PhoneError> {
        let trimmed = input.trim();
        if trimmed.is_empty() || trimmed.len() > 64 || !is_written_number(trimmed) {
            return Err(PhoneError::Unparseable {
                input: input.to_owned(),
            });
        }
        // "00" is the international call prefix in most of the world.
        let normalized = match trimmed.strip_prefix("00") {
            Some(rest) => format!("+{rest}"),
            None => trimmed.to_owned(),
        };
        // The common form, `+` and digits, is read here as `phonenumber` reads it, and
        // checked with the compiled rules; anything else goes through `phonenumber` itself.
        let quick = normalized
            .strip_prefix('+')
            .and_then(|digits| rules::read_international(digits, default_country))
            .and_then(|(code, national)| {
                rules::plausible(code, &national).map(|ok| (ok, code, national))
            });
        let (plausible, code, national) = match quick {
            Some(read) => read,
            None => {
                let number =
                    phonenumber::parse(Some(default_country), &normalized).map_err(|_| {
                        PhoneError::Unparseable {
                            input: input.to_owned(),
                        }
                    })?;
                (
                    is_plausible(&number),
                    number.code().value(),
                    *number.national(),
                )
            }
        };
        if !plausible {
            return Err(PhoneError::Invalid {
                input: input.to_owned(),
            });
        }
        // E.164 as `phonenumber`'s formatter writes it (`+`, the calling code, the national
        // number with its leading zeros), without the national format lookup it makes first.
        Ok(Self(format!("+{code}{national}")))
    }

    /// Wraps a string already known to be E.164 (read back from the store).
    pub fn from_e164_unchecked(e164: String) -> Self {
        Self(e164)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// ISO 3166-1 alpha-2 code of the number's country (`IL`), when it has a single one.
    pub fn country(&self) -> Option<String> {
        let parsed = phonenumber::parse(None, &self.0).ok()?;
        parsed.country().id().map(|id| format!("{id:?}"))
    }

    /// The number's country calling code (`972`).
    pub fn calling_code(&self) -> Option<u16> {
        phonenumber::parse(None, &self.0)
            .ok()
            .map(|n| n.code().value())
    }
}

/// Digits, an optional leading `+`, and separators; at least one digit.
fn is_written_number(s: &str) -> bool {
    let body = s.strip_prefix('+').unwrap_or(s);
    body.chars().any(|c| c.is_ascii_digit())
        && body.chars().all(|c| {
            c.is_ascii_digit() || c.is_whitespace() || matches!(c, '-' | '.' | '/' | '(' | ')')
        })
}

/// A number is plausible when it is valid for its country or, for ranges libphonenumber's
/// metadata does not list yet, when it fits the country's general number pattern and length.
fn is_plausible(number: &phonenumber::PhoneNumber) -> bool {
    rules::plausible(number.code().value(), number.national())
        .unwrap_or_else(|| is_plausible_by_phonenumber(number))
}

/// [`is_plausible`] through `phonenumber`'s own functions: what [`rules`] compiles ahead.
fn is_plausible_by_phonenumber(number: &phonenumber::PhoneNumber) -> bool {
    if phonenumber::is_valid(number) {
        return true;
    }
    let Some(meta) = number.metadata(&phonenumber::metadata::DATABASE) else {
        return false;
    };
    let national = number.national().value().to_string();
    let descriptors = meta.descriptors();
    let length = national.len() as u16;
    let fits_length = [
        descriptors.fixed_line(),
        descriptors.mobile(),
        descriptors.toll_free(),
        descriptors.voip(),
    ]
    .into_iter()
    .flatten()
    .chain(std::iter::once(descriptors.general()))
    .any(|d| d.possible_length().contains(&length));
    fits_length && descriptors.general().is_match(&national)
}

impl fmt::Display for PhoneNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn il() -> phonenumber::country::Id {
        parse_country("IL").unwrap()
    }

    #[test]
    fn national_and_international_forms_are_the_same_number() {
        let forms = [
            "050-123-4567",
            "+972 50 123 4567",
            "+972501234567",
            "00972501234567",
            "(050) 1234567",
        ];
        for form in forms {
            assert_eq!(
                PhoneNumber::parse(form, il()).unwrap().as_str(),
                "+972501234567",
                "{form}"
            );
        }
    }

    #[test]
    fn international_numbers_ignore_the_default_country() {
        let us = PhoneNumber::parse("+1 (201) 555-0123", il()).unwrap();
        assert_eq!(us.as_str(), "+12015550123");
        assert_eq!(us.country().as_deref(), Some("US"));
        assert_eq!(
            PhoneNumber::parse("+972502345678", il())
                .unwrap()
                .country()
                .as_deref(),
            Some("IL")
        );
    }

    #[test]
    fn garbage_and_invalid_numbers_are_refused() {
        for bad in [
            "",
            "hello",
            "+12",
            "123",
            "+972 1",
            &"9".repeat(100),
            "+359460470034010*",
            "+972501234567#",
            "+972 50 123 4567 ext. 12",
            "+972501234567;ext=12",
            "1-800-FLOWERS",
            "+972+501234567",
            "+972５01234567",
        ] {
            assert!(PhoneNumber::parse(bad, il()).is_err(), "{bad}");
        }
    }

    #[test]
    fn deserializing_goes_through_parse_and_takes_only_e164() {
        let number: PhoneNumber = serde_json::from_str("\"+972501234567\"").unwrap();
        assert_eq!(number.as_str(), "+972501234567");
        assert_eq!(serde_json::to_string(&number).unwrap(), "\"+972501234567\"");
        for bad in [
            "\"+1\"",
            "\"050-123-4567\"",
            "\"\"",
            "\"+97250123456789012\"",
        ] {
            assert!(
                serde_json::from_str::<PhoneNumber>(bad).is_err(),
                "{bad} deserialized"
            );
        }
    }

    /// The compiled rules answer as `phonenumber` does, for every calling code: on each
    /// region's example numbers (valid), the same with the last digit changed, with a digit
    /// more and a digit fewer, with a leading zero, and on random numbers of every length.
    #[test]
    fn compiled_rules_judge_numbers_of_every_calling_code_as_phonenumber_does() {
        use phonenumber::metadata::DATABASE;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        let mut codes: Vec<u16> = DATABASE.iter().map(|m| m.country_code()).collect();
        codes.sort_unstable();
        codes.dedup();
        let (mut valid, mut invalid) = (0, 0);
        for code in codes {
            let mut nationals = Vec::new();
            for meta in DATABASE.by_code(&code).unwrap_or_default() {
                let descriptions = rules::number_types(meta.descriptors());
                for example in descriptions
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.example())
                {
                    let mut changed = example.to_owned();
                    let last = changed.pop().and_then(|c| c.to_digit(10)).unwrap_or(0);
                    changed.push(char::from_digit((last + 1) % 10, 10).unwrap());
                    nationals.extend([
                        example.to_owned(),
                        changed,
                        format!("{example}7"),
                        example[..example.len() - 1].to_owned(),
                        format!("0{example}"),
                    ]);
                }
            }
            for len in 2..=15 {
                for _ in 0..3 {
                    nationals.push((0..len).map(|_| rng.random_range('0'..='9')).collect());
                }
            }
            for national in nationals {
                let Ok(number) = phonenumber::parse(None, format!("+{code}{national}")) else {
                    continue;
                };
                let expected = is_plausible_by_phonenumber(&number);
                if expected {
                    assert_eq!(
                        number.format().mode(phonenumber::Mode::E164).to_string(),
                        format!("+{}{}", number.code().value(), number.national()),
                    );
                }
                assert_eq!(
                    rules::plausible(number.code().value(), number.national()),
                    Some(expected),
                    "+{code} {national}"
                );
                if expected {
                    valid += 1;
                } else {
                    invalid += 1;
                }
            }
        }
        assert!(
            valid > 1000 && invalid > 1000,
            "{valid} valid, {invalid} not"
        );
    }

    /// `+digits` is read by the compiled rules as `phonenumber::parse` reads it, in every home
    /// country: random digits, and each calling code followed by random digits.
    #[test]
    fn compiled_reading_of_international_numbers_matches_phonenumber() {
        use phonenumber::metadata::DATABASE;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        let mut homes: Vec<&str> = DATABASE.iter().map(|m| m.id()).collect();
        homes.sort_unstable();
        homes.dedup();
        let mut codes: Vec<u16> = DATABASE.iter().map(|m| m.country_code()).collect();
        codes.sort_unstable();
        codes.dedup();
        let (mut read, mut left) = (0, 0);
        for home in homes {
            let Ok(home) = home.parse::<phonenumber::country::Id>() else {
                continue;
            };
            for i in 0..40 {
                let random = |rng: &mut rand::rngs::StdRng, len| -> String {
                    (0..len).map(|_| rng.random_range('0'..='9')).collect()
                };
                let digits = if i % 2 == 0 {
                    let len = rng.random_range(3..=17);
                    random(&mut rng, len)
                } else {
                    let code = codes[rng.random_range(0..codes.len())];
                    let len = rng.random_range(1..=13);
                    format!("{code}{}", random(&mut rng, len))
                };
                let Some((code, national)) = rules::read_international(&digits, home) else {
                    left += 1;
                    continue;
                };
                let number = phonenumber::parse(Some(home), format!("+{digits}"))
                    .unwrap_or_else(|e| panic!("+{digits} in {home:?}: {e:?}"));
                assert_eq!(
                    (number.code().value(), *number.national()),
                    (code, national),
                    "+{digits} in {home:?}"
                );
                read += 1;
            }
        }
        assert!(read > 2 * left && read > 4000, "{read} read, {left} left");
    }

    #[test]
    fn country_codes_parse_case_insensitively() {
        assert!(parse_country("us").is_ok());
        assert!(parse_country("XX").is_err());
    }
}
