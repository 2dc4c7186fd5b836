//! The agent's sandbox: acquisition, the id in the state, release, the file tools, `bash`
//! and `present_files`, run through real agents over a local provider.

mod file_tools;
mod handed;
mod left_running;
mod lifecycle;
mod present_files;
mod settlement;
mod support;
mod usage;
