//! What PostgreSQL reads differently in the store's SQL, which is written as SQLite reads it:
//! placeholders, a few functions and planner hints, and a script of several statements.

/// What a character of a query's text is part of, for reading the text as PostgreSQL does.
#[derive(Clone, Copy, PartialEq)]
enum Lexeme {
    Code,
    Quoted(char),
    Comment,
}

/// `text` as PostgreSQL reads it: SQLite's placeholders (`?`, `?N`) written as PostgreSQL's
/// (`$1`, `$N`; outside quoted text and comments, each `?` is the next number, each `?N` the
/// number `N`), and the floor of a value at zero, SQLite's two-argument `MAX(0, x)`, as
/// `GREATEST(0, x)`.
///
/// SQLite's planner hints are dropped: `INDEXED BY name`, and the unary `+` before a column
/// (`+created_at`) that keeps SQLite from using an index on it.
pub(super) fn pg_sql(text: &str) -> String {
    let mut text = pg_placeholders(text).replace("MAX(0, ", "GREATEST(0, ");
    while let Some(at) = text.find(" INDEXED BY ") {
        let rest = &text[at + " INDEXED BY ".len()..];
        let name = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        text.replace_range(at..at + " INDEXED BY ".len() + name, "");
    }
    text
}

fn pg_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut next = 0;
    let mut state = Lexeme::Code;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match state {
            Lexeme::Quoted(q) if c == q => state = Lexeme::Code,
            Lexeme::Comment if c == '\n' => state = Lexeme::Code,
            Lexeme::Code if c == '\'' || c == '"' => state = Lexeme::Quoted(c),
            Lexeme::Code if c == '-' && chars.peek() == Some(&'-') => state = Lexeme::Comment,
            Lexeme::Code
                if c == '+'
                    && out.ends_with([' ', '('])
                    && chars.peek().is_some_and(char::is_ascii_alphabetic) =>
            {
                continue;
            }
            Lexeme::Code if c == '?' => {
                out.push('$');
                if chars.peek().is_some_and(char::is_ascii_digit) {
                    while let Some(d) = chars.next_if(char::is_ascii_digit) {
                        out.push(d);
                    }
                } else {
                    next += 1;
                    out.push_str(&next.to_string());
                }
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The statements of a script (apart at each `;` outside quoted text and comments), each
/// with how many `?` placeholders it has.
pub(super) fn statements(text: &str) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut state = Lexeme::Code;
    let (mut start, mut marks) = (0, 0);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match state {
            Lexeme::Quoted(q) if c == q => state = Lexeme::Code,
            Lexeme::Comment if c == '\n' => state = Lexeme::Code,
            Lexeme::Code if c == '\'' || c == '"' => state = Lexeme::Quoted(c),
            Lexeme::Code if c == '-' && chars.peek().is_some_and(|(_, n)| *n == '-') => {
                state = Lexeme::Comment
            }
            Lexeme::Code if c == '?' => marks += 1,
            Lexeme::Code if c == ';' => {
                out.push((&text[start..i], marks));
                (start, marks) = (i + 1, 0);
            }
            _ => {}
        }
    }
    out.push((&text[start..], marks));
    out.retain(|(s, _)| !s.trim().is_empty());
    out
}

/// Whether `statement` is one whose changes SQLite's `changes()` counts.
pub(super) fn changes_rows(statement: &str) -> bool {
    let word = statement
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    ["INSERT", "UPDATE", "DELETE"]
        .iter()
        .any(|w| w.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_quoted_text_and_comments() {
        assert_eq!(
            pg_sql("SELECT * FROM calls INDEXED BY calls_x WHERE a = 1 + ? ORDER BY +b, MAX(0, c)"),
            "SELECT * FROM calls WHERE a = 1 + $1 ORDER BY b, GREATEST(0, c)"
        );
        assert_eq!(
            pg_placeholders("SELECT ?, '?', \"a?\", ?3 -- ?\n, ?"),
            "SELECT $1, '?', \"a?\", $3 -- ?\n, $2"
        );
    }

    #[test]
    fn a_script_is_cut_into_its_statements_with_their_placeholders() {
        let text = "BEGIN IMMEDIATE; UPDATE t SET a = ';?' WHERE b = ?; INSERT INTO u SELECT ?, ? WHERE changes() = 1; COMMIT";
        let cut: Vec<(String, usize)> = statements(text)
            .into_iter()
            .map(|(s, n)| (s.trim().to_owned(), n))
            .collect();
        assert_eq!(
            cut,
            vec![
                ("BEGIN IMMEDIATE".to_owned(), 0),
                ("UPDATE t SET a = ';?' WHERE b = ?".to_owned(), 1),
                (
                    "INSERT INTO u SELECT ?, ? WHERE changes() = 1".to_owned(),
                    2
                ),
                ("COMMIT".to_owned(), 0),
            ]
        );
        assert!(changes_rows(" insert into u"));
        assert!(!changes_rows("SELECT 1"));
    }
}
