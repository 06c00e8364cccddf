//! A minimal `tracing` subscriber that keeps the events and spans of target `tollgate`, with
//! their fields as text, for the tests to read back (scoped to one test with
//! `tracing::subscriber::with_default` or `set_default`).

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// What one event or span carried: its name (the message for events), its level and its
/// fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    pub name: String,
    pub level: String,
    pub fields: Vec<(String, String)>,
}

impl Seen {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.fields.push((
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        ));
    }
}

#[derive(Clone, Default)]
pub struct Collect {
    pub events: Arc<Mutex<Vec<Seen>>>,
    pub spans: Arc<Mutex<Vec<Seen>>>,
}

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tollgate"
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut seen = Seen {
            name: span.metadata().name().to_owned(),
            level: span.metadata().level().to_string(),
            ..Seen::default()
        };
        span.record(&mut seen);
        let mut spans = self.spans.lock().unwrap();
        spans.push(seen);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        values.record(&mut spans[span.into_u64() as usize - 1]);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut seen = Seen {
            level: event.metadata().level().to_string(),
            ..Seen::default()
        };
        event.record(&mut seen);
        seen.name = seen.field("message").unwrap_or_default().to_owned();
        self.events.lock().unwrap().push(seen);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
