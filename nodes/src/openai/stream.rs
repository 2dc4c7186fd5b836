//! A streamed call: posting, then reading server-sent events into chunks until the answer is
//! finished.

use std::collections::VecDeque;

use serde_json::Value;

use super::answer::answer_chunks;
use super::client::{is_json, OpenAiModel};
use super::sse::SseDecoder;
use super::streamed::StreamedAnswer;
use crate::model::{ModelChunk, ModelError};

/// The state of one streamed call.
pub(super) struct StreamState<'a> {
    pub(super) model: &'a OpenAiModel,
    pub(super) phase: Phase,
    pub(super) pending: VecDeque<Result<ModelChunk, ModelError>>,
}

pub(super) enum Phase {
    /// Not sent yet; the body to send.
    Start(Value),
    /// Reading events.
    Reading(Box<Reading>),
    /// Everything is queued.
    Finished,
}

impl StreamState<'_> {
    /// Move the stream on: queue chunks or an error, or finish.
    pub(super) async fn advance(&mut self) {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Finished => {}
            Phase::Start(body) => match self.model.post(&body, true).await {
                Err(e) => self.pending.push_back(Err(e)),
                Ok(response) => {
                    if is_json(&response) {
                        // A server that ignores `stream: true` answers whole.
                        match self.model.whole_answer(response).await {
                            Ok(answer) => self
                                .pending
                                .extend(answer_chunks(answer).into_iter().map(Ok)),
                            Err(e) => self.pending.push_back(Err(e)),
                        }
                    } else {
                        self.phase = Phase::Reading(Box::new(Reading {
                            status: response.status().as_u16(),
                            response,
                            lines: SseDecoder::default(),
                            answer: StreamedAnswer::default(),
                        }));
                    }
                }
            },
            Phase::Reading(reading) => self.read(reading).await,
        }
    }

    /// Read the next piece of the stream.
    async fn read(&mut self, mut reading: Box<Reading>) {
        let model = self.model;
        let Reading {
            response,
            status,
            lines,
            answer,
        } = &mut *reading;
        let read = tokio::time::timeout(model.config.timeout, response.chunk()).await;
        let mut events = Vec::new();
        let ended = match read {
            Err(_) => {
                self.pending.push_back(Err(model.timed_out("stream data")));
                return;
            }
            Ok(Err(e)) => {
                self.pending.push_back(Err(model.transport(&e)));
                return;
            }
            Ok(Ok(Some(bytes))) => {
                if let Err(message) = lines.push(&bytes, &mut events) {
                    self.pending.push_back(Err(model.decode(message)));
                    return;
                }
                false
            }
            Ok(Ok(None)) => {
                lines.finish(&mut events);
                true
            }
        };
        for event in events {
            match answer.apply(&model.config.model, *status, event) {
                Ok(Some(chunks)) => self.pending.extend(chunks.into_iter().map(Ok)),
                Ok(None) => {
                    self.pending.push_back(answer.finish(&model.config.model));
                    return;
                }
                Err(e) => {
                    self.pending.push_back(Err(e));
                    return;
                }
            }
        }
        if ended {
            if answer.finish_reason.is_none() {
                self.pending.push_back(Err(ModelError::Transport {
                    model: model.config.model.clone(),
                    message: "the stream ended before the answer was finished \
                              (no finish reason and no [DONE])"
                        .to_owned(),
                }));
            } else {
                self.pending.push_back(answer.finish(&model.config.model));
            }
            return;
        }
        self.phase = Phase::Reading(reading);
    }
}

/// A stream being read.
pub(super) struct Reading {
    response: reqwest::Response,
    status: u16,
    lines: SseDecoder,
    answer: StreamedAnswer,
}
