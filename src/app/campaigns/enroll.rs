//! Contacts on their way into a campaign: a JSON body's items or a CSV upload's rows, checked
//! (E.164 number, time zone, lead id) and staged on a blocking thread while the store writes
//! them in one transaction. Memory stays bounded whatever the upload's size: uploads and invalid
//! rows spool to a temporary file past a few megabytes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::campaign::CampaignStatus;
use switchboard_actors::ids::{CampaignId, LeadId};
use switchboard_actors::phone::PhoneNumber;
use utoipa::ToSchema;

use crate::app::auth::Auth;
use crate::app::campaigns::view::NOT_FOUND;
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::store::{CampaignRecord, ContactBatch, DncCheck, EnrollCounts, EnrollStep};

pub struct RawContact {
    pub phone_number: String,
    pub timezone: Option<String>,
    pub lead_id: Option<String>,
    pub variables: Map<String, Value>,
    pub metadata: Map<String, Value>,
}

pub fn parse_json_contacts(
    body: Map<String, Value>,
) -> Result<Vec<Result<RawContact, String>>, AppError> {
    check_fields(&body, &["contacts"])?;
    let items = match body.get("contacts") {
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(AppError::invalid_field("contacts", "must be an array"));
        }
        None => return Err(AppError::missing_field("contacts")),
    };
    if items.len() > MAX_JSON_CONTACTS {
        return Err(AppError::bad_request(format!(
            "Too many contacts: at most {MAX_JSON_CONTACTS} per request (send CSV for more)"
        )));
    }
    Ok(items
        .iter()
        .map(|item| {
            let obj = item.as_object().ok_or("must be an object")?;
            if let Some(k) = obj.keys().find(|k| !["phone_number", "timezone", "lead_id", "variables", "metadata"].contains(&k.as_str())) {
                return Err(format!("unknown field `{k}`; allowed: phone_number, timezone, lead_id, variables, metadata"));
            }
            let text = |k: &str| -> Result<Option<String>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(format!("`{k}` must be a string")),
                }
            };
            let object = |k: &str| -> Result<Map<String, Value>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(Map::new()),
                    Some(Value::Object(m)) => Ok(m.clone()),
                    Some(_) => Err(format!("`{k}` must be an object")),
                }
            };
            Ok(RawContact {
                phone_number: text("phone_number")?.ok_or("missing `phone_number`")?,
                timezone: text("timezone")?,
                lead_id: text("lead_id")?,
                variables: object("variables")?,
                metadata: object("metadata")?,
            })
        })
        .collect())
}

/// The columns of a CSV header: `phone_number` (required), `timezone` and `lead_id`; every other
/// named column is a variable.
pub struct CsvColumns {
    pub names: Vec<String>,
    pub phone: usize,
    pub timezone: Option<usize>,
    pub lead: Option<usize>,
}

impl CsvColumns {
    fn of(header: Result<&csv::StringRecord, csv::Error>) -> Result<Self, AppError> {
        let names: Vec<String> = header
            .map_err(|e| AppError::bad_request(format!("Invalid CSV header: {e}")))?
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        let phone = names
            .iter()
            .position(|h| h == "phone_number")
            .ok_or_else(|| AppError::bad_request("CSV header must name a `phone_number` column"))?;
        let timezone = names.iter().position(|h| h == "timezone");
        let lead = names.iter().position(|h| h == "lead_id");
        Ok(Self {
            names,
            phone,
            timezone,
            lead,
        })
    }

    fn contact(&self, record: &csv::StringRecord) -> Result<RawContact, String> {
        let cell = |i: Option<usize>| {
            i.and_then(|i| record.get(i))
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let mut variables = Map::new();
        for (i, name) in self.names.iter().enumerate() {
            if i != self.phone
                && Some(i) != self.timezone
                && Some(i) != self.lead
                && !name.is_empty()
                && let Some(v) = record.get(i)
            {
                variables.insert(name.clone(), Value::String(v.to_owned()));
            }
        }
        Ok(RawContact {
            phone_number: cell(Some(self.phone)).ok_or("missing phone_number")?,
            timezone: cell(self.timezone),
            lead_id: cell(self.lead),
            variables,
            metadata: Map::new(),
        })
    }
}

/// A contact that passed the checks that need no database: its number in E.164, its time zone,
/// its lead id well formed; variables and metadata as JSON text.
pub struct Checked {
    pub phone_number: String,
    pub timezone: Option<String>,
    pub lead_id: Option<LeadId>,
    pub variables: String,
    pub metadata: String,
}

pub fn check(c: RawContact, country: phonenumber::country::Id) -> Result<Checked, String> {
    let number = PhoneNumber::parse(&c.phone_number, country).map_err(|e| e.to_string())?;
    if let Some(tz) = &c.timezone {
        tz.parse::<chrono_tz::Tz>()
            .map_err(|_| format!("`{tz}` is not an IANA time zone"))?;
    }
    let lead_id = c
        .lead_id
        .as_deref()
        .map(|l| {
            uuid::Uuid::parse_str(l)
                .map(LeadId::from_uuid)
                .map_err(|_| format!("lead_id `{l}` is not a UUID"))
        })
        .transpose()?;
    Ok(Checked {
        phone_number: number.as_str().to_owned(),
        timezone: c.timezone,
        lead_id,
        variables: Value::Object(c.variables).to_string(),
        metadata: Value::Object(c.metadata).to_string(),
    })
}

/// Bytes kept in memory up to [`Spool::MEMORY`], then in an unnamed temporary file (gone with
/// the handle) in the data directory.
pub struct Spool {
    pub dir: std::path::PathBuf,
    pub memory: Vec<u8>,
    pub file: Option<std::io::BufWriter<std::fs::File>>,
}

impl Spool {
    const MEMORY: usize = 4 << 20;

    fn new(dir: &std::path::Path) -> Self {
        Self {
            dir: dir.to_owned(),
            memory: Vec::new(),
            file: None,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        if self.file.is_none() && self.memory.len() + bytes.len() > Self::MEMORY {
            std::fs::create_dir_all(&self.dir)?;
            let mut file =
                std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile_in(&self.dir)?);
            file.write_all(&self.memory)?;
            self.memory = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write_all(bytes),
            None => {
                self.memory.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// What was written, from the start.
    fn into_reader(self) -> std::io::Result<SpoolReader> {
        use std::io::Seek;
        Ok(match self.file {
            None => SpoolReader::Memory(self.memory),
            Some(file) => {
                let mut file = file.into_inner().map_err(|e| e.into_error())?;
                file.rewind()?;
                SpoolReader::File(Box::new(std::io::BufReader::with_capacity(1 << 20, file)))
            }
        })
    }
}

pub enum SpoolReader {
    Memory(Vec<u8>),
    File(Box<dyn std::io::BufRead + Send>),
}

impl SpoolReader {
    pub(super) fn into_buf_read(self) -> Box<dyn std::io::BufRead + Send> {
        match self {
            Self::Memory(bytes) => Box::new(std::io::Cursor::new(bytes)),
            Self::File(file) => file,
        }
    }
}

/// The contacts of one request on their way in, in submission order: checked rows wait in
/// `pending` for the lead check, then valid contacts go on to the enrollment's transaction in
/// [`ContactBatch`]es and invalid rows to `invalid` as the JSON of [`InvalidRow`]s. Memory holds
/// at most [`Staging::PENDING`] rows, one batch and the spool's memory part, whatever the size of
/// the upload.
pub struct Staging {
    pub country: phonenumber::country::Id,
    pub pending: Vec<(usize, Result<Checked, String>)>,
    pub batch: ContactBatch,
    pub steps: tokio::sync::mpsc::Sender<std::io::Result<EnrollStep>>,
    pub invalid: Spool,
    pub invalid_rows: usize,
}

/// Why staging stopped.
pub enum Stopped {
    /// The upload is refused: answer this.
    Refused(AppError),
    /// The enrollment's transaction ended (its own error says why), or the staging failed.
    Stopped(AppError),
}

impl Staging {
    /// Rows checked against the workspace's leads at once.
    const PENDING: usize = 10_000;

    fn push(&mut self, row: usize, contact: Result<RawContact, String>) -> Result<(), Stopped> {
        let checked = contact.and_then(|c| check(c, self.country));
        self.pending.push((row, checked));
        if self.pending.len() >= Self::PENDING {
            self.check_leads()?;
        }
        Ok(())
    }

    fn send(&self, step: EnrollStep) -> Result<(), Stopped> {
        self.steps
            .blocking_send(Ok(step))
            .map_err(|_| Stopped::Stopped(AppError::Internal(anyhow::anyhow!("enrollment ended"))))
    }

    /// Checks the pending rows' leads (one question for all of them) and moves the rows on: a
    /// lead that is not one of the workspace's makes its row invalid.
    fn check_leads(&mut self) -> Result<(), Stopped> {
        let mut ids: Vec<LeadId> = self
            .pending
            .iter()
            .filter_map(|(_, c)| c.as_ref().ok()?.lead_id)
            .collect();
        ids.sort_by_key(|l| l.as_uuid());
        ids.dedup();
        let leads = if ids.is_empty() {
            std::collections::HashSet::new()
        } else {
            let (reply, answer) = tokio::sync::oneshot::channel();
            self.send(EnrollStep::Leads { ids, reply })?;
            answer.blocking_recv().map_err(|_| {
                Stopped::Stopped(AppError::Internal(anyhow::anyhow!("enrollment ended")))
            })?
        };
        let mut pending = std::mem::take(&mut self.pending);
        for (row, checked) in pending.drain(..) {
            let checked = checked.and_then(|c| match c.lead_id {
                Some(lead) if !leads.contains(&lead) => {
                    Err(format!("lead_id `{lead}` is not a lead of this workspace"))
                }
                _ => Ok(c),
            });
            match checked {
                Ok(c) => {
                    self.batch.push(
                        &c.phone_number,
                        c.timezone.as_deref(),
                        c.lead_id,
                        &c.variables,
                        &c.metadata,
                        None,
                    );
                    if self.batch.len() >= ContactBatch::ROWS {
                        let batch = std::mem::take(&mut self.batch);
                        self.send(EnrollStep::Batch(batch))?;
                    }
                }
                Err(error) => {
                    let json = serde_json::to_vec(&InvalidRow { row, error })
                        .map_err(|e| Stopped::Stopped(staging_failed(e.into())))?;
                    if self.invalid_rows > 0 {
                        self.invalid.write(b",").map_err(staging_stopped)?;
                    }
                    self.invalid.write(&json).map_err(staging_stopped)?;
                    self.invalid_rows += 1;
                }
            }
        }
        self.pending = pending;
        Ok(())
    }

    /// Sends the last rows; answers the invalid rows (comma-separated JSON objects).
    fn finish(mut self) -> Result<SpoolReader, Stopped> {
        self.check_leads()?;
        let batch = std::mem::take(&mut self.batch);
        if !batch.is_empty() {
            self.send(EnrollStep::Batch(batch))?;
        }
        self.invalid.into_reader().map_err(staging_stopped)
    }
}

fn staging_failed(e: std::io::Error) -> AppError {
    AppError::Internal(anyhow::Error::new(e).context("staging an enrollment"))
}

fn staging_stopped(e: std::io::Error) -> Stopped {
    Stopped::Stopped(staging_failed(e))
}

/// Receives an upload's bytes (a request body, a form's file) into a spool; refused with 413 past
/// `max_csv_body_bytes`, declared or received.
pub async fn receive<S, E>(
    state: &App,
    declared: Option<u64>,
    mut body: S,
) -> Result<SpoolReader, AppError>
where
    S: futures_util::Stream<Item = Result<axum::body::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    let limit = state.config.max_csv_body_bytes;
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(AppError::UploadTooLarge { limit });
    }
    let mut spool = Spool::new(&state.config.data_dir);
    let mut total = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| AppError::bad_request(format!("Could not read the upload: {e}")))?;
        total += chunk.len();
        if total > limit {
            return Err(AppError::UploadTooLarge { limit });
        }
        spool.write(&chunk).map_err(staging_failed)?;
    }
    spool.into_reader().map_err(staging_failed)
}

/// Parses a received CSV and stages its rows; more than `max_rows` data rows are refused (413).
fn stage_csv(body: SpoolReader, staging: &mut Staging, max_rows: usize) -> Result<(), Stopped> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .buffer_capacity(1 << 16)
        .from_reader(body.into_buf_read());
    let columns = CsvColumns::of(reader.headers()).map_err(Stopped::Refused)?;
    let mut record = csv::StringRecord::new();
    let mut ahead = csv::StringRecord::new();
    // A row read ahead, to tell the last row (which an unclosed quote turns into) apart.
    let mut peeked: Option<Result<bool, csv::Error>> = None;
    let mut row = 0;
    loop {
        let read = match peeked.take() {
            Some(read) => {
                std::mem::swap(&mut record, &mut ahead);
                read
            }
            None => reader.read_record(&mut record),
        };
        let contact = match read {
            Ok(false) => return Ok(()),
            Ok(true) if record.iter().any(|f| f.contains('\n')) => {
                // A quote never closed takes the rest of the file into one field: when this
                // row with a line break in a field is the last, it is refused as what it is.
                let next = reader.read_record(&mut ahead);
                let last = matches!(next, Ok(false));
                peeked = Some(next);
                if last {
                    Err(format!(
                        "a quote opened on line {} is never closed: the rest of the file was read as one field",
                        record.position().map_or(0, |p| p.line())
                    ))
                } else {
                    columns.contact(&record)
                }
            }
            Ok(true) => columns.contact(&record),
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                return Err(Stopped::Stopped(AppError::Internal(anyhow::Error::new(e))));
            }
            Err(e) => Err(format!("unreadable CSV row: {e}")),
        };
        row += 1;
        if row > max_rows {
            return Err(Stopped::Refused(AppError::TooManyRows { limit: max_rows }));
        }
        staging.push(row, contact)?;
    }
}

/// What a request submitted: a JSON body's contacts, or a received CSV.
pub enum Submitted {
    Json(Vec<Result<RawContact, String>>),
    Csv(SpoolReader),
}

/// Stages `submitted` on a blocking thread while [`Store::enroll_batches`] writes what it sends in
/// one transaction; answers the counts and the invalid rows. A refused upload (its header, its
/// size) rolls the transaction back and is the answer.
pub async fn enroll_staged(
    state: &App,
    auth: &Auth,
    campaign: &CampaignRecord,
    submitted: Submitted,
) -> Result<(EnrollCounts, SpoolReader), AppError> {
    let ws = auth.workspace_id;
    let country = state.store.default_country(ws).await?;
    let (steps, received) = tokio::sync::mpsc::channel(2);
    let mut staging = Staging {
        country,
        pending: Vec::with_capacity(Staging::PENDING),
        batch: ContactBatch::default(),
        steps,
        invalid: Spool::new(&state.config.data_dir),
        invalid_rows: 0,
    };
    let max_rows = state.config.max_csv_rows;
    let staged = tokio::task::spawn_blocking(move || {
        let staged = match submitted {
            Submitted::Json(contacts) => contacts
                .into_iter()
                .enumerate()
                .try_for_each(|(i, c)| staging.push(i + 1, c)),
            Submitted::Csv(body) => stage_csv(body, &mut staging, max_rows),
        };
        let steps = staging.steps.clone();
        let staged = staged.and_then(|()| staging.finish());
        if staged.is_err() {
            // Rolls the transaction back.
            let _ = steps.blocking_send(Err(std::io::Error::other("staging stopped")));
        }
        staged
    });
    let steps = Box::pin(futures_util::stream::unfold(received, |mut r| async move {
        r.recv().await.map(|step| (step, r))
    }));
    let stored = state
        .store
        .enroll_batches(
            ws,
            campaign.id,
            steps,
            DncCheck::Blocked {
                agent: campaign.settings.agent_id,
            },
            auth.key_id,
        )
        .await;
    let staged = staged
        .await
        .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?;
    match (staged, stored) {
        (Err(Stopped::Refused(e)), _) => Err(e),
        (_, Err(e)) => Err(e.into()),
        (_, Ok(None)) => Err(NOT_FOUND),
        (Err(Stopped::Stopped(e)), Ok(Some(_))) => Err(e),
        (Ok(invalid), Ok(Some(counts))) => Ok((counts, invalid)),
    }
}

/// At most this many contacts in one JSON request.
pub const MAX_JSON_CONTACTS: usize = 10_000;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InvalidRow {
    /// 1-based position among the submitted contacts (CSV: data rows, after the header).
    pub row: usize,
    pub error: String,
}

/// Contacts are not enrolled into a stopped, completed or archived campaign.
pub fn refuse_terminal(campaign: &CampaignRecord) -> Result<(), AppError> {
    if campaign.status.is_terminal() {
        return Err(AppError::bad_request(format!(
            "Campaign is {}; contacts cannot be enrolled",
            campaign.status.as_str()
        )));
    }
    Ok(())
}

/// What an upload enrolled, for a person to read: the counts and the first invalid rows.
pub struct EnrollReport {
    pub counts: EnrollCounts,
    pub invalid: Vec<InvalidRow>,
    pub invalid_total: usize,
}

/// Enrolls an uploaded CSV (the dashboard's form) exactly as `POST /campaigns/{id}/contacts`
/// enrolls a `text/csv` body; answers the report with at most `shown` invalid rows.
pub async fn enroll_csv_upload<S, E>(
    state: &App,
    auth: &Auth,
    id: CampaignId,
    declared: Option<u64>,
    body: S,
    shown: usize,
) -> Result<EnrollReport, AppError>
where
    S: futures_util::Stream<Item = Result<axum::body::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let campaign = enrolling_into(state, auth, id).await?;
    refuse_terminal(&campaign)?;
    let received = receive(state, declared, body).await?;
    let (counts, invalid) = enroll(state, auth, &campaign, Submitted::Csv(received)).await?;
    let rows = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<InvalidRow>> {
        let mut bytes = b"[".to_vec();
        std::io::Read::read_to_end(&mut invalid.into_buf_read(), &mut bytes)?;
        bytes.push(b']');
        Ok(serde_json::from_slice(&bytes)?)
    })
    .await
    .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?
    .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?;
    let invalid_total = rows.len();
    Ok(EnrollReport {
        counts,
        invalid: rows.into_iter().take(shown).collect(),
        invalid_total,
    })
}

/// The campaign `id` of the caller's workspace, to enroll into; refused when it is gone.
pub async fn enrolling_into(
    state: &App,
    auth: &Auth,
    id: CampaignId,
) -> Result<CampaignRecord, AppError> {
    state
        .store
        .campaign(auth.workspace_id, id)
        .await?
        .ok_or(NOT_FOUND)
}

/// Enrolls what was submitted into `campaign` (already checked by [`refuse_terminal`]) in one
/// transaction, and wakes the campaign when it runs; answers the counts and the invalid rows.
pub async fn enroll(
    state: &App,
    auth: &Auth,
    campaign: &CampaignRecord,
    submitted: Submitted,
) -> Result<(EnrollCounts, SpoolReader), AppError> {
    let enrolled = enroll_staged(state, auth, campaign, submitted).await?;
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    Ok(enrolled)
}
