//! Switchboard as its users see it: real HTTP against the real service on a real SQLite file.

mod helpers;

mod campaigns;
mod discovery;
mod dispositions;
