//! Runnable examples for stategraph; see the `[[example]]` targets in this package.
