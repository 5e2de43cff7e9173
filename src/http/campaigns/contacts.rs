//! A campaign's contacts: enrollment (JSON or CSV), the list, and one contact with its calls and
//! why it is, or is not, being dialled now.

use axum::response::{IntoResponse, Response};

use super::*;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, enroll))
        .routes(routes!(get_contact))
}

/// At most this many contacts in one JSON request.
pub const MAX_JSON_CONTACTS: usize = 10_000;

#[derive(Debug, Serialize, ToSchema)]
pub struct InvalidRow {
    /// 1-based position among the submitted contacts (CSV: data rows, after the header).
    pub row: usize,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnrollResult {
    pub enrolled: i64,
    pub duplicates: i64,
    pub excluded_dnc: i64,
    pub invalid: Vec<InvalidRow>,
}

body_schema!(
    /// The JSON body of `POST /campaigns/{id}/contacts`; a contact that breaks a rule is
    /// reported in `invalid` and the others are enrolled.
    ContactsBody = json(contacts_schema())
);

fn contacts_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["contacts"],
        "properties": {
            "contacts": {
                "type": "array",
                "maxItems": MAX_JSON_CONTACTS,
                "items": {
                    "description": "{phone_number, timezone?, lead_id?, variables?, metadata?}: phone_number E.164 (or national in the workspace's country), lead_id a lead of the workspace. An item that is not such an object is reported in `invalid`, not refused.",
                },
            },
        },
    })
}

struct RawContact {
    phone_number: String,
    timezone: Option<String>,
    lead_id: Option<String>,
    variables: Map<String, Value>,
    metadata: Map<String, Value>,
}

fn parse_json_contacts(
    body: Map<String, Value>,
) -> Result<Vec<Result<RawContact, String>>, ApiError> {
    check_fields(&body, &["contacts"])?;
    let items = match body.get("contacts") {
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::invalid_field("contacts", "must be an array"));
        }
        None => return Err(ApiError::missing_field("contacts")),
    };
    if items.len() > MAX_JSON_CONTACTS {
        return Err(ApiError::bad_request(format!(
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
struct CsvColumns {
    names: Vec<String>,
    phone: usize,
    timezone: Option<usize>,
    lead: Option<usize>,
}

impl CsvColumns {
    fn of(header: Result<&csv::StringRecord, csv::Error>) -> Result<Self, ApiError> {
        let names: Vec<String> = header
            .map_err(|e| ApiError::bad_request(format!("Invalid CSV header: {e}")))?
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        let phone = names
            .iter()
            .position(|h| h == "phone_number")
            .ok_or_else(|| ApiError::bad_request("CSV header must name a `phone_number` column"))?;
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
struct Checked {
    phone_number: String,
    timezone: Option<String>,
    lead_id: Option<LeadId>,
    variables: String,
    metadata: String,
}

fn check(c: RawContact, country: phonenumber::country::Id) -> Result<Checked, String> {
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
struct Spool {
    dir: std::path::PathBuf,
    memory: Vec<u8>,
    file: Option<std::io::BufWriter<std::fs::File>>,
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

enum SpoolReader {
    Memory(Vec<u8>),
    File(Box<dyn std::io::BufRead + Send>),
}

impl SpoolReader {
    fn into_buf_read(self) -> Box<dyn std::io::BufRead + Send> {
        match self {
            Self::Memory(bytes) => Box::new(std::io::Cursor::new(bytes)),
            Self::File(file) => file,
        }
    }
}

/// The contacts of one request on their way in, in submission order: checked rows wait in
/// `pending` for the lead check, then valid contacts go to `contacts` in [`ContactBatch`]es and
/// invalid rows to `invalid` as the JSON of [`InvalidRow`]s. Memory holds at most
/// [`Staging::PENDING`] rows, one batch and the spools' memory parts, whatever the size of the
/// upload.
struct Staging {
    country: phonenumber::country::Id,
    pending: Vec<(usize, Result<Checked, String>)>,
    batch: ContactBatch,
    contacts: Spool,
    invalid: Spool,
    invalid_rows: usize,
}

impl Staging {
    /// Rows checked against the workspace's leads at once.
    const PENDING: usize = 10_000;

    fn new(country: phonenumber::country::Id, dir: &std::path::Path) -> Self {
        Self {
            country,
            pending: Vec::with_capacity(Self::PENDING),
            batch: ContactBatch::default(),
            contacts: Spool::new(dir),
            invalid: Spool::new(dir),
            invalid_rows: 0,
        }
    }

    /// Takes the `row`th submitted contact (1-based), or why it could not be read.
    fn push(&mut self, row: usize, contact: Result<RawContact, String>) {
        let checked = contact.and_then(|c| check(c, self.country));
        self.pending.push((row, checked));
    }

    fn is_full(&self) -> bool {
        self.pending.len() >= Self::PENDING
    }

    /// The lead ids the pending rows name, each once.
    fn pending_leads(&self) -> Vec<LeadId> {
        let mut ids: Vec<LeadId> = self
            .pending
            .iter()
            .filter_map(|(_, c)| c.as_ref().ok()?.lead_id)
            .collect();
        ids.sort_by_key(|l| l.as_uuid());
        ids.dedup();
        ids
    }

    /// Moves the pending rows on: a lead that is not in `leads` makes its row invalid.
    fn flush(&mut self, leads: &std::collections::HashSet<LeadId>) -> std::io::Result<()> {
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
                        self.write_batch()?;
                    }
                }
                Err(error) => {
                    if self.invalid_rows > 0 {
                        self.invalid.write(b",")?;
                    }
                    let json = serde_json::to_vec(&InvalidRow { row, error })?;
                    self.invalid.write(&json)?;
                    self.invalid_rows += 1;
                }
            }
        }
        self.pending = pending;
        Ok(())
    }

    fn write_batch(&mut self) -> std::io::Result<()> {
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() {
            return Ok(());
        }
        let mut line = batch.to_line();
        line.push('\n');
        self.contacts.write(line.as_bytes())
    }

    /// The staged contacts (lines of batches) and invalid rows (comma-separated JSON objects).
    fn finish(mut self) -> std::io::Result<(SpoolReader, SpoolReader)> {
        self.write_batch()?;
        Ok((self.contacts.into_reader()?, self.invalid.into_reader()?))
    }
}

/// Checks the pending rows' leads (one query for all of them) and moves the rows on.
async fn check_leads(
    store: &Store,
    ws: WorkspaceId,
    staging: &mut Staging,
) -> Result<(), ApiError> {
    let ids = staging.pending_leads();
    let leads = if ids.is_empty() {
        std::collections::HashSet::new()
    } else {
        store.existing_leads(ws, &ids).await?
    };
    staging.flush(&leads).map_err(staging_failed)
}

fn staging_failed(e: std::io::Error) -> ApiError {
    ApiError::Internal(anyhow::Error::new(e).context("staging an enrollment"))
}

/// The request body as blocking reads, fed chunk by chunk from the connection.
struct ChannelReader {
    chunks: tokio::sync::mpsc::Receiver<axum::body::Bytes>,
    current: axum::body::Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// Reads a CSV body as it arrives and stages its rows: the connection is read here, the rows are
/// parsed and checked on a blocking thread, never more than a few chunks and one batch in
/// memory. Past `max_csv_body_bytes` or `max_csv_rows` the upload is refused (413).
async fn stage_csv(
    state: &AppState,
    ws: WorkspaceId,
    req: Request,
    mut staging: Staging,
) -> Result<Staging, ApiError> {
    use futures_util::StreamExt;
    let limit = state.config.max_csv_body_bytes;
    let max_rows = state.config.max_csv_rows;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let feed = async move {
        let mut body = req.into_body().into_data_stream();
        let mut total = 0usize;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::bad_request(format!("Could not read the request body: {e}"))
            })?;
            total += chunk.len();
            if total > limit {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            if tx.send(chunk).await.is_err() {
                // The parser stopped on an error of its own.
                break;
            }
        }
        Ok(())
    };
    let store = state.store.clone();
    let handle = tokio::runtime::Handle::current();
    let parse = tokio::task::spawn_blocking(move || {
        let reader = ChannelReader {
            chunks: rx,
            current: axum::body::Bytes::new(),
        };
        let parsed = parse_csv(reader, &mut staging, max_rows, |staging| {
            handle.block_on(check_leads(&store, ws, staging))
        });
        (parsed, staging)
    });
    let (fed, parsed) = tokio::join!(feed, parse);
    let (parsed, staging) = parsed.map_err(|e| ApiError::Internal(anyhow::Error::new(e)))?;
    // A body that could not be read, or was too large, explains whatever the parser saw.
    fed?;
    parsed?;
    Ok(staging)
}

fn parse_csv(
    reader: impl std::io::Read,
    staging: &mut Staging,
    max_rows: usize,
    mut check_leads: impl FnMut(&mut Staging) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .buffer_capacity(1 << 16)
        .from_reader(reader);
    let columns = CsvColumns::of(reader.headers())?;
    let mut record = csv::StringRecord::new();
    let mut row = 0;
    loop {
        let contact = match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => columns.contact(&record),
            Err(e) => Err(format!("unreadable CSV row: {e}")),
        };
        row += 1;
        if row > max_rows {
            return Err(ApiError::TooManyRows { limit: max_rows });
        }
        staging.push(row, contact);
        if staging.is_full() {
            check_leads(staging)?;
        }
    }
    check_leads(staging)
}

/// The staged batches, read back one line at a time off the runtime's threads.
fn batches(
    spool: SpoolReader,
) -> impl futures_util::Stream<Item = std::io::Result<ContactBatch>> + Unpin {
    let reader = spool.into_buf_read();
    Box::pin(futures_util::stream::unfold(
        Some(reader),
        |reader| async move {
            let mut reader = reader?;
            let read = tokio::task::spawn_blocking(move || {
                let mut line = String::new();
                let n = reader.read_line(&mut line);
                (reader, n, line)
            })
            .await;
            match read {
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
                Ok((_, Ok(0), _)) => None,
                Ok((_, Err(e), _)) => Some((Err(e), None)),
                Ok((reader, Ok(_), line)) => {
                    let batch = ContactBatch::from_line(&line)
                        .ok_or_else(|| std::io::Error::other("a staged batch does not read back"));
                    Some((batch, Some(reader)))
                }
            }
        },
    ))
}

/// The answer, `{enrolled, duplicates, excluded_dnc, invalid: [...]}` as [`EnrollResult`]
/// serializes, with the invalid rows streamed from their spool when they did not fit in memory.
fn enroll_response(counts: EnrollCounts, invalid: SpoolReader) -> Response {
    let head = format!(
        "{{\"enrolled\":{},\"duplicates\":{},\"excluded_dnc\":{},\"invalid\":[",
        counts.enrolled, counts.duplicates, counts.excluded
    );
    let body = match invalid {
        SpoolReader::Memory(rows) => {
            let mut body = head.into_bytes();
            body.extend_from_slice(&rows);
            body.extend_from_slice(b"]}");
            axum::body::Body::from(body)
        }
        SpoolReader::File(file) => {
            let rows = futures_util::stream::unfold(Some(file), |file| async move {
                let mut file = file?;
                let read = tokio::task::spawn_blocking(move || {
                    let mut chunk = vec![0; 1 << 16];
                    let n = std::io::Read::read(&mut file, &mut chunk);
                    (file, n, chunk)
                })
                .await;
                match read {
                    Err(e) => Some((Err(std::io::Error::other(e)), None)),
                    Ok((_, Ok(0), _)) => None,
                    Ok((_, Err(e), _)) => Some((Err(e), None)),
                    Ok((file, Ok(n), mut chunk)) => {
                        chunk.truncate(n);
                        Some((Ok(axum::body::Bytes::from(chunk)), Some(file)))
                    }
                }
            });
            use futures_util::StreamExt;
            let stream = futures_util::stream::iter([Ok(axum::body::Bytes::from(head))])
                .chain(rows)
                .chain(futures_util::stream::iter([Ok(
                    axum::body::Bytes::from_static(b"]}"),
                )]));
            axum::body::Body::from_stream(stream)
        }
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Enroll contacts (JSON `{contacts: [...]}` up to 10,000, or a `text/csv` body)
#[utoipa::path(post, path = "/campaigns/{id}/contacts", operation_id = "enrollCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)),
    request_body(content((ContactsBody = "application/json"), (String = "text/csv")), description = "JSON {contacts: [{phone_number, timezone?, lead_id?, variables?, metadata?}]} or text/csv with a phone_number column, read as it arrives"),
    responses((status = 200, body = EnrollResult), (status = 400), (status = 404), (status = 413)))]
async fn enroll(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    req: Request,
) -> Result<Response, ApiError> {
    let ws = auth.workspace_id;
    let campaign = state
        .store
        .campaign(ws, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let is_csv = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/csv"));
    let refuse_terminal = || {
        if campaign.status.is_terminal() {
            return Err(ApiError::bad_request(format!(
                "Campaign is {}; contacts cannot be enrolled",
                campaign.status.as_str()
            )));
        }
        Ok(())
    };
    let country = state.store.default_country(ws).await?;
    let started = std::time::Instant::now();
    let mut staging = Staging::new(country, &state.config.data_dir);
    if is_csv {
        // Refused before the upload is read rather than after.
        refuse_terminal()?;
        staging = stage_csv(&state, ws, req, staging).await?;
    } else {
        let JsonObject(body) = JsonObject::from_request(req, &state).await?;
        let raw = parse_json_contacts(body)?;
        refuse_terminal()?;
        for (i, item) in raw.into_iter().enumerate() {
            staging.push(i + 1, item);
        }
        check_leads(&state.store, ws, &mut staging).await?;
    }
    let invalid_rows = staging.invalid_rows;
    let (contacts, invalid) = staging.finish().map_err(staging_failed)?;
    let staged = started.elapsed();
    let counts = state
        .store
        .enroll_batches(
            ws,
            campaign.id,
            batches(contacts),
            DncCheck::Blocked {
                agent: campaign.settings.agent_id,
            },
            auth.key_id,
        )
        .await?
        .ok_or(NOT_FOUND)?;
    tracing::info!(
        campaign = %campaign.id,
        enrolled = counts.enrolled,
        duplicates = counts.duplicates,
        excluded_dnc = counts.excluded,
        invalid = invalid_rows,
        read_and_checked_ms = staged.as_millis() as u64,
        written_ms = (started.elapsed() - staged).as_millis() as u64,
        "contacts enrolled"
    );
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    Ok(enroll_response(counts, invalid))
}

fn contact_state_schema() -> utoipa::openapi::schema::Object {
    crate::http::extract::one_of(ContactState::ALL.map(ContactState::as_str))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContactQuery {
    /// pending, dialing, awaiting_disposition, scheduled, retired, exhausted or excluded.
    #[param(schema_with = contact_state_schema)]
    state: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List a campaign's contacts
#[utoipa::path(get, path = "/campaigns/{id}/contacts", operation_id = "listCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ContactQuery), responses((status = 200, body = ListResponse<Contact>), (status = 404)))]
async fn list_contacts(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(q): Q<ContactQuery>,
) -> Result<Json<ListResponse<Contact>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let contact_state = q
        .state
        .as_deref()
        .map(|s| {
            ContactState::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid query parameter `state`: `{s}` is not a contact state"
                ))
            })
        })
        .transpose()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .list_contacts(auth.workspace_id, c.id, contact_state, page)
            .await?,
        page,
    )))
}

/// Why a contact is, or is not, being dialled now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactStatus {
    /// `call_in_progress`, `awaiting_disposition`, `retry_scheduled`, `outside_calling_window`,
    /// `daily_cap_reached`, `waiting_for_a_slot`, `campaign_<status>`, `retired`, `exhausted`,
    /// `excluded:<reason>`.
    pub reason: String,
    /// When that changes, if known.
    pub until: Option<DateTime<Utc>>,
    pub message: String,
}

/// A contact with its calls (every dial of every attempt) and why it is where it is.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactDetail {
    #[serde(flatten)]
    pub contact: Contact,
    /// Every call placed for the contact, oldest first.
    pub calls: Vec<CallRecord>,
    pub dialing_status: ContactStatus,
}

async fn contact_status(
    state: &AppState,
    c: &CampaignRecord,
    contact: &Contact,
    calls: &[CallRecord],
) -> Result<ContactStatus, ApiError> {
    let now = state.store.now();
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    let campaign = CampaignFacts {
        status: c.status,
        window: &window,
        ends_at: c.settings.ends_at,
        daily_window_date: c.daily_window_date,
        daily_admitted_count: c.daily_admitted_count,
        max_calls_per_day: c.settings.max_calls_per_day,
        disposition_timeout: chrono::Duration::from_std(state.config.disposition_timeout)
            .unwrap_or(chrono::Duration::MAX),
    };
    let Some(contact_state) = ContactState::parse(&contact.state) else {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "contact {} has an unknown state {:?}",
            contact.id,
            contact.state
        )));
    };
    let facts = ContactFacts {
        state: contact_state,
        attempts: contact.attempts,
        excluded_reason: contact.excluded_reason.as_deref(),
        next_attempt_at: contact.next_attempt_at,
        timezone: contact.timezone.as_deref(),
        phone_number: &contact.phone_number,
        last_call_ended_at: calls.last().and_then(|k| k.ended_at),
    };
    let hold = contact_hold(&campaign, &facts, now);
    Ok(ContactStatus {
        reason: hold.reason(),
        until: hold.until(),
        message: hold.message(c.last_tick_result.as_deref()),
    })
}

/// Get one contact of a campaign, with its calls and why it is or is not being dialled now
#[utoipa::path(get, path = "/campaigns/{id}/contacts/{contact_id}", operation_id = "getCampaignContact", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ("contact_id" = uuid::Uuid, Path)), responses((status = 200, body = ContactDetail), (status = 404)))]
async fn get_contact(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(id, contact_id): PathIds,
) -> Result<Json<ContactDetail>, ApiError> {
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let contact = state
        .store
        .contact(auth.workspace_id, c.id, ContactId::from_uuid(contact_id))
        .await?
        .ok_or(ApiError::NotFound {
            resource: "Contact",
        })?;
    let calls = state
        .store
        .contact_calls(auth.workspace_id, contact.id)
        .await?;
    let dialing_status = contact_status(&state, &c, &contact, &calls).await?;
    Ok(Json(ContactDetail {
        contact,
        calls,
        dialing_status,
    }))
}
