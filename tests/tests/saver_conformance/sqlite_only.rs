//! Clauses only the SQLite saver has (its file format).
