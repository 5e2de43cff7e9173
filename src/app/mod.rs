//! The service's operations, called alike by the REST API, the dashboard and the CLI.
