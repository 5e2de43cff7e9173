//! Campaigns: what creating, changing, commanding and enrolling do and refuse.
//!
//! - [`view`]: the campaign as the API shows it, creation, and its effective calling window;
//! - [`patch`]: each writable field's rule, applied to the stored settings;
//! - [`commands`]: launch, resume, pause, stop and archive through the spec's state table;
//! - [`enroll`]: contacts on their way in (checked, spooled, fed to the store's transaction);
//! - [`contacts`]: each contact with why it is or is not being dialled now.

pub mod commands;
pub mod contacts;
pub mod enroll;
pub mod patch;
pub mod view;
