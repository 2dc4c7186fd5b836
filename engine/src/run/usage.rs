//! A run's token usage: the totals its model calls add ([`NodeContext::record_usage`]), and
//! the [`UsageMeter`]s a caller gives the run to read them also when it fails.
//!
//! [`NodeContext::record_usage`]: crate::NodeContext::record_usage

use std::sync::{Arc, Mutex};

use stategraph_checkpoints::TokenUsage;

use stategraph_checkpoints::sync::Unpoisoned;

/// A shared counter of token usage: given to runs through [`RunConfig::usage_meter`], it
/// adds what each of them records, while they run and however they end (a failed or
/// cancelled run has no [`RunOutcome`](crate::RunOutcome) to read). Cloning shares it.
///
/// ```
/// use stategraph::{RunConfig, UsageMeter};
/// use stategraph::checkpoints::TokenUsage;
///
/// let meter = UsageMeter::new();
/// let _config = RunConfig::new().usage_meter(meter.clone());
/// meter.add(TokenUsage::of_call(10, 2, 12));
/// assert_eq!(meter.total().total_tokens, 12);
/// ```
///
/// [`RunConfig::usage_meter`]: crate::RunConfig::usage_meter
#[derive(Debug, Clone, Default)]
pub struct UsageMeter(Arc<Mutex<TokenUsage>>);

impl UsageMeter {
    /// A meter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `usage` to the total.
    pub fn add(&self, usage: TokenUsage) {
        *self.0.lock().unpoisoned() += usage;
    }

    /// The total so far.
    pub fn total(&self) -> TokenUsage {
        *self.0.lock().unpoisoned()
    }
}

/// The usage of one run (every graph level of it): its own total, and the meters its config
/// gave.
#[derive(Debug, Default)]
pub(crate) struct RunUsage {
    own: UsageMeter,
    meters: Vec<UsageMeter>,
}

impl RunUsage {
    /// A run's usage, also added to `meters`.
    pub(crate) fn new(meters: Vec<UsageMeter>) -> Self {
        RunUsage {
            own: UsageMeter::new(),
            meters,
        }
    }

    /// Add a call's (or a child run's) usage.
    pub(crate) fn add(&self, usage: TokenUsage) {
        self.own.add(usage);
        for meter in &self.meters {
            meter.add(usage);
        }
    }

    /// Every meter an addition goes to: the run's own, then its config's.
    pub(crate) fn meters(&self) -> Vec<UsageMeter> {
        std::iter::once(&self.own)
            .chain(&self.meters)
            .cloned()
            .collect()
    }

    /// The run's total so far.
    pub(crate) fn total(&self) -> TokenUsage {
        self.own.total()
    }
}
