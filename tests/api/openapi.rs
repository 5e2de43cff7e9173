//! The OpenAPI document as a new user's tools read it: `openapi-spec-validator` finds it valid,
//! and schemathesis, sending what the document allows, gets the answers the document describes.
//! `/docs` renders from the service alone.
//!
//! The tools come from PyPI (`./scripts/test` installs them in `target/py`). Without them the
//! tool tests say so and pass, except on CI (`CI` set), where a missing tool fails them.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::{Method, StatusCode};

use crate::helpers::spawn_app;

/// Where `./scripts/test` installs the Python tools.
fn venv_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py/bin")
}

/// The tool's path in `target/py`, else on `PATH`; `None` (with a note) when it is missing and
/// this is not CI.
fn tool(name: &str) -> Option<PathBuf> {
    let local = venv_bin().join(name);
    if local.is_file() {
        return Some(local);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    if on_path.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "`{name}` is missing on CI: ./scripts/test installs it"
        );
        eprintln!("note: `{name}` is not installed (./scripts/test installs it); not run");
    }
    on_path
}

/// Runs a tool to the end (at most six minutes: a guard against a hang, not a measure; the
/// whole API's fuzzing takes about 100 s alone on two cores and more beside the rest of the
/// suite), returning its exit status and output.
async fn run(mut command: tokio::process::Command) -> (bool, String) {
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(360), command.output())
        .await
        .expect("the tool finishes within six minutes")
        .expect("the tool starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test]
async fn the_openapi_document_passes_openapi_spec_validator() {
    let Some(validator) = tool("openapi-spec-validator") else {
        return;
    };
    let app = spawn_app().await;
    let doc = app.send(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(doc.status, StatusCode::OK);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &doc.text).expect("document written");
    let mut command = tokio::process::Command::new(validator);
    command.arg("--validation-errors").arg("all").arg(&file);
    let (ok, output) = run(command).await;
    assert!(ok, "openapi-spec-validator:\n{output}");
    assert!(output.contains(": OK"), "{output}");
}

#[tokio::test]
async fn every_json_request_body_lists_its_fields_and_refuses_other_keys() {
    let app = spawn_app().await;
    let doc = app.send(Method::GET, "/openapi.json", None, None).await;
    let doc: serde_json::Value = serde_json::from_str(&doc.text).expect("JSON document");
    let schemas = &doc["components"]["schemas"];
    let mut untyped = Vec::new();
    let mut bodies = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") else {
                continue;
            };
            bodies += 1;
            let schema = match schema["$ref"].as_str() {
                Some(target) => &schemas[target.trim_start_matches("#/components/schemas/")],
                None => schema,
            };
            let typed = schema["type"] == "object"
                && schema["properties"]
                    .as_object()
                    .is_some_and(|p| !p.is_empty())
                && schema["additionalProperties"] == false;
            if !typed {
                untyped.push(format!("{} {path}: {schema}", method.to_uppercase()));
            }
        }
    }
    assert!(bodies > 20, "only {bodies} JSON request bodies found");
    assert!(
        untyped.is_empty(),
        "untyped request bodies:\n{}",
        untyped.join("\n")
    );
}

#[tokio::test]
async fn schemathesis_finds_no_answer_the_document_does_not_describe() {
    let Some(st) = tool("st") else {
        return;
    };
    let app = spawn_app().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemathesis.toml");
    let mut command = tokio::process::Command::new(st);
    command
        .current_dir(dir.path())
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(app.url("/openapi.json"))
        .args(["--checks", "all"])
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", app.key))
        .args(["--max-examples", "10", "--seed", "1", "--workers", "1"])
        // Text holding the NUL character is refused with a 400 (no database keeps it the same
        // way: PostgreSQL refuses it), so such requests are not sent as valid ones.
        .args(["--generation-allow-x00", "false"])
        .args(["--generation-database", "none", "--no-color"]);
    let (ok, output) = run(command).await;
    let summary = output
        .find("SUMMARY")
        .map_or(output.as_str(), |at| &output[at..]);
    eprintln!("{summary}");
    assert!(ok, "schemathesis:\n{output}");
    assert!(
        !summary.contains("Failures:") && !summary.contains("failure"),
        "schemathesis found failures:\n{output}"
    );
}

#[tokio::test]
async fn the_docs_page_loads_everything_from_the_service_itself() {
    let app = spawn_app().await;
    let page = app.send(Method::GET, "/docs", None, None).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text.to_ascii_lowercase();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page names another host: {}",
        page.text
    );
    let mut sources = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for (at, _) in html.match_indices(attr) {
            let rest = &page.text[at + attr.len()..];
            sources.push(rest[..rest.find('"').unwrap_or(rest.len())].to_owned());
        }
    }
    assert!(
        sources.iter().any(|s| s.ends_with(".js")),
        "no script in {}",
        page.text
    );
    for source in &sources {
        assert!(
            source.starts_with('/') && !source.starts_with("//"),
            "{source} is not served by the service"
        );
        let asset = app.send(Method::GET, source, None, None).await;
        assert_eq!(asset.status, StatusCode::OK, "{source}");
        assert!(!asset.text.is_empty(), "{source} is empty");
    }
    // The page fetches the document from the service too.
    assert!(page.text.contains("'/openapi.json'"), "{}", page.text);
}
