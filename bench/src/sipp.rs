//! Running SIPp (overload's caller, outbound-load's reference far end) and reading its
//! `;`-separated trace files.

use std::path::Path;

use anyhow::Context;

/// Starts SIPp's `cmd` in `dir`, its errors in `dir/sipp.err`.
pub(crate) fn launch(
    cmd: &mut tokio::process::Command,
    dir: &Path,
    bin: &Path,
) -> anyhow::Result<tokio::process::Child> {
    cmd.current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("sipp.err"))?)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (Debian: apt-get install sip-tester)",
                bin.display()
            )
        })
}

/// SIPp's `;`-separated trace files: a header of names, then rows of values.
pub(crate) struct SippCsv {
    names: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl SippCsv {
    pub(crate) fn parse(text: &str) -> SippCsv {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let split = |l: &str| l.split(';').map(|v| v.trim().to_string()).collect();
        let names = lines.next().map(split).unwrap_or_default();
        let rows = lines.map(split).collect();
        SippCsv { names, rows }
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The last row's `(name, value)` pairs.
    pub(crate) fn last_row(&self) -> impl Iterator<Item = (&str, &str)> {
        let row = self.rows.last().map(Vec::as_slice).unwrap_or_default();
        self.names
            .iter()
            .map(String::as_str)
            .zip(row.iter().map(String::as_str))
    }

    /// A number of the last row.
    pub(crate) fn last(&self, name: &str) -> Option<f64> {
        let i = self.index(name)?;
        self.rows.last()?.get(i)?.parse().ok()
    }

    /// The sum of the last row's numbers whose names end in `suffix`.
    pub(crate) fn last_sum(&self, suffix: &str) -> u64 {
        self.last_row()
            .filter(|(k, _)| k.ends_with(suffix))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum()
    }

    /// The first row's time (Unix seconds), in its first column.
    pub(crate) fn first_time(&self) -> Option<f64> {
        unix_secs(self.rows.first()?.first()?)
    }

    /// Each row's time (Unix seconds, the last of SIPp's tab-separated date fields) in column
    /// `time` and number in column `name`.
    pub(crate) fn series(&self, time: &str, name: &str) -> Vec<(f64, f64)> {
        let (Some(t), Some(v)) = (self.index(time), self.index(name)) else {
            return Vec::new();
        };
        self.rows
            .iter()
            .filter_map(|r| Some((unix_secs(r.get(t)?)?, r.get(v)?.parse().ok()?)))
            .collect()
    }
}

/// `2026-11-23\t09:10:51.296676\t1795425051.296676`: the Unix time at the end.
fn unix_secs(field: &str) -> Option<f64> {
    field.rsplit('\t').next()?.trim().parse().ok()
}
