//! Switchboard as its users see it: real HTTP against the real service on a real SQLite file.

mod helpers;

mod agents;
mod discovery;
mod dispositions;
mod phone_numbers;
