//! Switchboard as its users see it: real HTTP against the real service on a real SQLite file.

mod helpers;

mod affiliates;
mod agents;
mod billing;
mod call_detail;
mod call_states;
mod call_tools;
mod call_windows;
mod calls;
mod campaigns;
mod carrier_accounts;
mod cli;
mod contacts;
mod converse;
mod crash;
mod discovery;
mod dispositions;
mod dnc;
mod engine;
mod engine_retries;
mod integrations;
mod lead_memory;
mod leads;
mod openapi;
mod overload;
mod pcap;
mod phone_numbers;
mod rig;
mod rtp_source;
mod shared_links;
mod sip_amd;
mod sip_calls;
mod sip_deadlines;
mod sip_endpoint_actor;
mod sip_endpoints;
mod sip_kill_loop;
mod sip_outbound;

mod sip_recordings;
mod sip_restart;
mod sip_ua;
mod sipp;
mod tools;
mod vendor;
mod webhooks;
