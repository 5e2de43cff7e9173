//! The work a call starts on tasks of its own, and how it reports back: a transcription, the
//! model's streamed reply, a sentence's synthesis, a tool's run. The loop never awaits any of
//! them.

use std::sync::Arc;

use super::Speech;
use super::SpeechError;
use super::director::{Dispatch, HardFailure, Outcome};
use super::speech_handle::SpeechId;
use crate::call_tools::{CallParties, CallTools, Integrations, ToolRun};
use crate::conversation::{ToolEvent, ToolStatus};
use crate::turns::Sentences;
use crate::vendors::VendorError;
use crate::vendors::{ChatEvent, ChatModel, ChatRequest, ToolCall, Transcriber, Transcript};

/// What a task of the conversation reports back to the call.
pub(super) enum Work {
    /// A transcription of the caller's speech.
    Heard {
        result: Result<Transcript, VendorError>,
    },
    /// An early transcription of the caller's speech so far, made at pause `pause`.
    Early {
        pause: u64,
        result: Result<Transcript, VendorError>,
    },
    /// The next sentence of a reply of utterance `speech`.
    Sentence { speech: SpeechId, text: String },
    /// The model asked for a function.
    Function { speech: SpeechId, call: ToolCall },
    /// A tool dispatched for utterance `speech` (dispatched `at_ms` into the call) has answered.
    ToolDone {
        speech: SpeechId,
        call: ToolCall,
        run: ToolRun,
        at_ms: u64,
    },
    /// The model's round of utterance `speech` is complete (or failed).
    Replied {
        speech: SpeechId,
        result: Result<(), VendorError>,
    },
    /// A dispatch of the director's course (dispatched `at_ms` into the call) came back.
    Dispatched {
        outcome: Outcome,
        event: ToolEvent,
        at_ms: u64,
    },
    /// Sentence `index` of utterance `speech`'s audio.
    Spoken {
        speech: SpeechId,
        index: u32,
        text: String,
        result: Result<Arc<[i16]>, SpeechError>,
    },
}

/// The sending side of a call's work queue.
#[derive(Clone)]
pub(super) struct WorkTx(tokio::sync::mpsc::UnboundedSender<Box<Work>>);

/// The receiving side of a call's work queue.
pub(super) struct WorkRx(tokio::sync::mpsc::UnboundedReceiver<Box<Work>>);

/// A call's work queue. Its messages travel boxed: a channel allocates room for 32 messages
/// when it is made, and a call holds its queue for its whole life, so unboxed that room would
/// be about 9 KiB a call.
pub(super) fn work_queue() -> (WorkTx, WorkRx) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (WorkTx(tx), WorkRx(rx))
}

impl WorkTx {
    pub(super) fn send(&self, work: Work) {
        // The call has ended when nobody receives: the report is moot.
        let _ = self.0.send(Box::new(work));
    }

    /// Transcribes `audio`; the transcript comes back as what `report` makes of it.
    pub(super) fn transcribe(
        &self,
        transcriber: &Arc<dyn Transcriber>,
        audio: Arc<[i16]>,
        rate: u32,
        language: &str,
        report: impl FnOnce(Result<Transcript, VendorError>) -> Work + Send + 'static,
    ) {
        let (transcriber, work, language) =
            (transcriber.clone(), self.clone(), language.to_string());
        tokio::spawn(async move {
            let result = transcriber.transcribe(&audio, rate, &language).await;
            work.send(report(result));
        });
    }

    /// Synthesizes sentence `index` of utterance `utterance`; its audio comes back as
    /// [`Work::Spoken`].
    pub(super) fn synthesize(
        &self,
        speech: &Arc<dyn Speech>,
        voice: &Voice,
        index: u32,
        utterance: SpeechId,
        text: String,
    ) {
        let (speech, work, voice) = (speech.clone(), self.clone(), voice.clone());
        tokio::spawn(async move {
            let result = speech
                .speak(&text, &voice.voice, &voice.language, voice.rate)
                .await;
            work.send(Work::Spoken {
                speech: utterance,
                index,
                text,
                result,
            });
        });
    }

    /// Runs `call` on `tools` once; its run comes back as [`Work::ToolDone`]. Never aborted: a
    /// dispatched webhook is not taken back.
    pub(super) fn run_tool(
        &self,
        tools: Arc<dyn CallTools>,
        call: ToolCall,
        parties: CallParties,
        speech: SpeechId,
        at_ms: u64,
    ) {
        let work = self.clone();
        tokio::spawn(async move {
            let run = tools.run(&call, &parties).await;
            work.send(Work::ToolDone {
                speech,
                call,
                run,
                at_ms,
            });
        });
    }

    /// Runs a dispatch of the director's course once (a tool_call node's tool, an
    /// integration_call node's action); it comes back as [`Work::Dispatched`]. Never aborted.
    pub(super) fn dispatch(
        &self,
        tools: Option<Arc<dyn CallTools>>,
        integrations: Option<Arc<dyn Integrations>>,
        dispatch: Dispatch,
        parties: CallParties,
        at_ms: u64,
    ) {
        let work = self.clone();
        tokio::spawn(async move {
            let (outcome, event) = match dispatch {
                Dispatch::Tool {
                    node_id,
                    name,
                    arguments,
                    ..
                } => match tools {
                    Some(tools) => {
                        let call = ToolCall {
                            id: super::director::dispatch_call_id(&node_id),
                            name,
                            arguments: arguments.to_string(),
                        };
                        let run = tools.run(&call, &parties).await;
                        let outcome = match run.event.status {
                            ToolStatus::Succeeded => Outcome::Done(
                                serde_json::from_str(&run.content)
                                    .unwrap_or(serde_json::Value::String(run.content)),
                            ),
                            _ => Outcome::ToolFailed(run.event.error.clone().unwrap_or_default()),
                        };
                        (outcome, run.event)
                    }
                    None => {
                        let why = "the call has no tools".to_string();
                        (
                            Outcome::ToolFailed(why.clone()),
                            failed(&name, arguments, why),
                        )
                    }
                },
                Dispatch::Integration {
                    node_id,
                    integration_id,
                    provider,
                    action,
                    arguments,
                } => match integrations {
                    Some(integrations) => {
                        let run = integrations
                            .run(&node_id, &integration_id, &provider, &action, &arguments)
                            .await;
                        (run.outcome, run.event)
                    }
                    None => {
                        let why = HardFailure::Disconnected;
                        let name = format!("{provider}.{action}");
                        let event = failed(&name, arguments.into(), why.as_str().into());
                        (Outcome::Failed(why), event)
                    }
                },
            };
            work.send(Work::Dispatched {
                outcome,
                event,
                at_ms,
            });
        });
    }

    /// Starts the model's round on `request`: its sentences, function calls and end come
    /// back as [`Work`] of utterance `speech`. Aborted when the returned handle is dropped.
    pub(super) fn converse(
        &self,
        model: &Arc<dyn ChatModel>,
        request: ChatRequest,
        speech: SpeechId,
    ) -> Abort {
        let (model, work) = (model.clone(), self.clone());
        Abort(tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut sentences = Sentences::default();
            let result = async {
                let mut stream = model.stream(request).await?;
                while let Some(event) = stream.next().await {
                    match event? {
                        ChatEvent::Text(text) => {
                            for text in sentences.push(&text) {
                                work.send(Work::Sentence { speech, text });
                            }
                        }
                        ChatEvent::ToolCall(call) => {
                            // What the model said before the call is said before what the
                            // call leads to (a flow's next line), however short.
                            if let Some(text) = sentences.finish() {
                                work.send(Work::Sentence { speech, text });
                            }
                            work.send(Work::Function { speech, call });
                        }
                        ChatEvent::Done { .. } => break,
                    }
                }
                Ok(())
            }
            .await;
            if let Some(text) = sentences.finish() {
                work.send(Work::Sentence { speech, text });
            }
            work.send(Work::Replied { speech, result });
        }))
    }
}

/// The record of a dispatch that could not run.
fn failed(name: &str, arguments: serde_json::Value, error: String) -> ToolEvent {
    ToolEvent::at_once(name, arguments, ToolStatus::Failed, Some(error))
}

impl WorkRx {
    pub(super) async fn recv(&mut self) -> Option<Work> {
        self.0.recv().await.map(|work| *work)
    }
}

/// How the agent's sentences are voiced.
#[derive(Debug, Clone)]
pub(super) struct Voice {
    pub voice: String,
    pub language: String,
    pub rate: u32,
}

/// Aborts a task when dropped: a reply nobody will hear stops being written.
pub(super) struct Abort(pub(super) tokio::task::JoinHandle<()>);

impl Abort {
    /// Waits for the task's end.
    pub(super) async fn join(&mut self) -> Result<(), tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}
