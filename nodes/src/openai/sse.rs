//! Server-sent events: splitting a byte stream into the events' data.

use serde_json::Value;

/// How long a stream line may grow without a line break before the stream is refused.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The longest server-sent event accepted, in bytes.
const MAX_SSE_EVENT: usize = 8 << 20;

/// One server-sent event's data.
#[derive(Debug)]
pub(super) enum SseEvent {
    /// `data: [DONE]`.
    Done,
    /// A JSON payload.
    Json(Value),
    /// A payload that is not JSON.
    Invalid(String),
}

/// Splits a byte stream into server-sent events: `\n` or `\r\n` line ends, `:` comments,
/// `data:` fields joined until a blank line (or until they form a whole JSON value, for
/// servers that leave out the blank line), other fields ignored.
#[derive(Default)]
pub(super) struct SseDecoder {
    buffer: Vec<u8>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// Take in more bytes; complete events go to `out`.
    pub(super) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.buffer[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let line = &self.buffer[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = String::from_utf8_lossy(line).into_owned();
            self.line(&line, out);
            start = end + 1;
        }
        self.buffer.drain(..start);
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(format!(
                "a stream line grew past {MAX_LINE_BYTES} bytes without a line break"
            ));
        }
        Ok(())
    }

    /// The stream ended: flush what is left.
    pub(super) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        let rest = std::mem::take(&mut self.buffer);
        let rest = String::from_utf8_lossy(&rest);
        let rest = rest.trim_end_matches('\r');
        if !rest.is_empty() {
            self.line(rest, out);
        }
        self.dispatch(out);
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        if line.starts_with('{') {
            // A bare JSON line (no `data:` field), as a few servers write.
            self.dispatch(out);
            self.data.push_str(line);
            self.has_data = true;
            self.dispatch(out);
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field != "data" {
            return;
        }
        if self.has_data {
            self.data.push('\n');
        }
        if self.data.len() + value.len() > MAX_SSE_EVENT {
            // An event that never ends is a broken stream, not a reason to run out of memory.
            self.data.clear();
            self.has_data = false;
            out.push(SseEvent::Invalid(format!(
                "an event longer than {MAX_SSE_EVENT} bytes"
            )));
            return;
        }
        self.data.push_str(value);
        self.has_data = true;
        let trimmed = self.data.trim();
        if trimmed == "[DONE]" {
            self.dispatch(out);
        } else if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            self.data.clear();
            self.has_data = false;
            out.push(SseEvent::Json(value));
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            return;
        }
        let data = std::mem::take(&mut self.data);
        self.has_data = false;
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        out.push(if data == "[DONE]" {
            SseEvent::Done
        } else {
            match serde_json::from_str(data) {
                Ok(value) => SseEvent::Json(value),
                Err(_) => SseEvent::Invalid(data.to_owned()),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parts: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for part in parts {
            decoder.push(part, &mut out).unwrap();
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn sse_lines_split_anywhere_decode_the_same() {
        let text = ": keep-alive\r\n\r\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let got = events(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(got.len(), 2, "cut at {cut}: {got:?}");
            assert!(
                matches!(&got[0], SseEvent::Json(v) if v["a"] == "é"),
                "cut at {cut}"
            );
            assert!(matches!(got[1], SseEvent::Done), "cut at {cut}");
        }
    }

    #[test]
    fn multi_line_data_joins_and_bare_json_lines_count() {
        let got = events(&[b"data: {\"a\":\ndata: 1}\n\n{\"b\":2}\ndata: nonsense\n\n"]);
        assert!(matches!(&got[0], SseEvent::Json(v) if v["a"] == 1));
        assert!(matches!(&got[1], SseEvent::Json(v) if v["b"] == 2));
        assert!(matches!(&got[2], SseEvent::Invalid(s) if s == "nonsense"));
        assert_eq!(got.len(), 3);
    }
}
