//! The manual as a reader follows it: every link and image of README.md, ARCHITECTURE.md and
//! docs/ leads to a file that exists and, with an anchor, to a heading of that page; every page
//! of docs/ is reachable from the README.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md and every `.md` file under docs/, relative to the repository.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        let mut names: Vec<_> = fs::read_dir(root.join(&dir))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").file_name())
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(name);
            if root.join(&path).is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages
}

/// The text with every fenced code block blanked (its lines kept, empty), so that line numbers
/// still match the file.
fn without_fences(text: &str) -> String {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                out.push("");
            }
            (Some((m, len)), Some(c))
                if c == m && run >= len && trimmed[run..].trim().is_empty() =>
            {
                fence = None;
                out.push("");
            }
            (Some(_), _) => out.push(""),
            (None, _) => out.push(line),
        }
    }
    out.join("\n")
}

/// The text with every inline code span (which may run over lines within a paragraph) turned
/// into spaces, newlines kept.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut close = None;
        let mut j = i + run;
        while j < chars.len() {
            if chars[j] == '\n' && chars.get(j + 1) == Some(&'\n') {
                break;
            }
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|c| **c == '`').count();
                if other == run {
                    close = Some(j + other);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(
                    chars[i..end]
                        .iter()
                        .map(|c| if *c == '\n' { '\n' } else { ' ' }),
                );
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// Every `[text](target)` and `![alt](target)` outside code, as (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = without_code_spans(&without_fences(text));
    let mut found = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let rest = &prose[at + 2..];
        let target = match rest.strip_prefix('<') {
            Some(angled) => angled.split('>').next().unwrap_or(""),
            None => rest.split([')', ' ', '\n']).next().unwrap_or(""),
        };
        let line = prose[..at].matches('\n').count() + 1;
        found.push((line, target.to_owned()));
    }
    found
}

/// GitHub's anchor for a heading: lowercased, punctuation other than `-` and `_` dropped,
/// each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// A heading's text as GitHub renders it, before the slug: a link keeps its text.
fn rendered(heading: &str) -> String {
    let mut text = heading.to_owned();
    while let Some(open) = text.find('[') {
        let Some(mid) = text[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = text[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..open],
            &text[open + 1..mid],
            &text[close + 1..]
        );
    }
    text
}

/// The anchors of a page's headings (ATX and setext), duplicates numbered as GitHub numbers
/// them: `name`, `name-1`, `name-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    let fenced = without_fences(text);
    let lines: Vec<&str> = fenced.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        let atx = indent <= 3
            && (1..=6).contains(&hashes)
            && (trimmed.len() == hashes || trimmed[hashes..].starts_with([' ', '\t']));
        let heading = if atx {
            let text = trimmed[hashes..].trim();
            let closed = text.trim_end_matches('#');
            if closed.is_empty() || closed.ends_with([' ', '\t']) {
                Some(closed.trim().to_owned())
            } else {
                Some(text.to_owned())
            }
        } else {
            let underline = trimmed.trim_end();
            let setext = indent <= 3
                && !underline.is_empty()
                && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'));
            let above = n.checked_sub(1).map(|p| lines[p].trim()).unwrap_or("");
            (setext && !above.is_empty() && !above.starts_with(['#', '|', '-', '*', '>']))
                .then(|| above.to_owned())
        };
        let Some(heading) = heading else {
            continue;
        };
        let base = slug(&rendered(&heading));
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        anchors.insert(anchor);
    }
    anchors
}

fn external(target: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.to_ascii_lowercase().starts_with(scheme))
}

/// Where a relative link of `page` points, as a path from the repository (`None`: the page
/// itself).
fn resolve(page: &Path, path: &str) -> Option<PathBuf> {
    if path.is_empty() {
        return None;
    }
    let path = path.replace("%20", " ");
    let joined = match path.strip_prefix('/') {
        Some(from_root) => PathBuf::from(from_root),
        None => page.parent().unwrap_or(Path::new("")).join(path),
    };
    let mut normal = PathBuf::new();
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir => {
                if !normal.pop() {
                    normal.push("..");
                }
            }
            std::path::Component::CurDir => {}
            other => normal.push(other),
        }
    }
    Some(normal)
}

/// Every broken link of the pages, as `file:line: target (why)`.
fn broken_links(root: &Path, pages: &[PathBuf]) -> Vec<String> {
    let mut headings: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut broken = Vec::new();
    for page in pages {
        let text = fs::read_to_string(root.join(page))
            .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for (line, target) in links(&text) {
            if external(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = resolve(page, path).unwrap_or_else(|| page.clone());
            let why = if target.is_empty() {
                Some("an empty target".to_owned())
            } else if !root.join(&file).exists() {
                Some(format!("no file {}", file.display()))
            } else {
                match anchor {
                    Some(anchor) if file.extension().is_some_and(|ext| ext == "md") => {
                        let known = headings.entry(file.clone()).or_insert_with(|| {
                            anchors(&fs::read_to_string(root.join(&file)).unwrap_or_default())
                        });
                        (!known.contains(anchor))
                            .then(|| format!("no heading #{anchor} in {}", file.display()))
                    }
                    _ => None,
                }
            };
            if let Some(why) = why {
                broken.push(format!("{}:{line}: {target} ({why})", page.display()));
            }
        }
    }
    broken
}

#[test]
fn every_link_in_the_docs_leads_somewhere() {
    let root = root();
    let pages = pages(&root);
    assert!(pages.len() > 2, "docs/ holds the manual's pages: {pages:?}");
    let broken = broken_links(&root, &pages);
    assert!(
        broken.is_empty(),
        "{} broken links in the docs:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_page_of_the_docs_is_linked_from_the_readme() {
    let root = root();
    let readme = Path::new("README.md");
    let text = fs::read_to_string(root.join(readme)).expect("README.md");
    let linked: BTreeSet<PathBuf> = links(&text)
        .into_iter()
        .filter(|(_, target)| !external(target))
        .filter_map(|(_, target)| resolve(readme, target.split('#').next().unwrap_or("")))
        .collect();
    let mut unlinked = Vec::new();
    for entry in fs::read_dir(root.join("docs")).expect("docs/") {
        let name = entry.expect("a directory entry").file_name();
        let page = Path::new("docs").join(&name);
        if page.extension().is_some_and(|ext| ext == "md") && !linked.contains(&page) {
            unlinked.push(page.display().to_string());
        }
    }
    unlinked.sort();
    assert!(
        unlinked.is_empty(),
        "pages of docs/ the README does not link to:\n{}",
        unlinked.join("\n")
    );
}

#[test]
fn the_link_checker_finds_what_is_broken() {
    let page = "# Title\n\n## Same name\n\n## Same name\n\n### Dashboard pages: `dashboard`\n\n\
        [ok](#title) [twice](#same-name-1) [code](#dashboard-pages-dashboard) [gone](#nope)\n\
        ![missing](no-such-image.png) [far](https://example.com/x) `[in code](nowhere.md)`\n\
        ```text\n[fenced](nowhere.md)\n```\n[split\nover lines](#title)\n";
    let found = links(page);
    let targets: Vec<&str> = found.iter().map(|(_, target)| target.as_str()).collect();
    assert_eq!(
        targets,
        [
            "#title",
            "#same-name-1",
            "#dashboard-pages-dashboard",
            "#nope",
            "no-such-image.png",
            "https://example.com/x",
            "#title"
        ]
    );
    assert_eq!(found[4].0, 10, "the line of the image");
    assert_eq!(
        found[6].0, 15,
        "the line a link spanning lines ends its text on"
    );
    let known = anchors(page);
    for anchor in [
        "title",
        "same-name",
        "same-name-1",
        "dashboard-pages-dashboard",
    ] {
        assert!(known.contains(anchor), "{anchor} in {known:?}");
    }
    assert!(!known.contains("nope"));

    let dir = tempfile::tempdir().expect("a temporary directory");
    fs::write(dir.path().join("page.md"), page).expect("the page is written");
    let broken = broken_links(dir.path(), &[PathBuf::from("page.md")]);
    assert_eq!(
        broken,
        [
            "page.md:9: #nope (no heading #nope in page.md)",
            "page.md:10: no-such-image.png (no file no-such-image.png)"
        ]
    );
}

/// Every end reason a call can have is named in the manual, where a reader looks up what a
/// call's `end_reason` means.
#[test]
fn every_end_reason_is_documented() {
    let root = root();
    let manual: String = pages(&root)
        .iter()
        .filter(|p| p.starts_with("docs"))
        .map(|p| fs::read_to_string(root.join(p)).expect("a page of the manual"))
        .collect();
    let missing: Vec<&str> = switchboard_actors::call::EndReason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|name| !manual.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "end reasons the manual does not name: {missing:?}"
    );
}

/// Every field a campaign's create body takes is in the table of the manual's page on
/// campaigns, where a reader looks for the body.
#[test]
fn every_campaign_field_is_documented_where_it_is_created() {
    let page = fs::read_to_string(root().join("docs/campaigns.md")).expect("docs/campaigns.md");
    let section = page
        .split("## Creating a campaign")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the page has a section on creating a campaign");
    let missing: Vec<&str> = switchboard_actors::campaign::WRITABLE_FIELDS
        .iter()
        .copied()
        .filter(|f| !section.contains(&format!("`{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "fields the section does not name: {missing:?}"
    );
}
