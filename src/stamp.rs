//! What every document rdmabench writes carries: the JSON schema's version, and the UTC
//! time it was made (serve's log lines, compare's and qualify's reports).

/// Version of the JSON documents rdmabench writes; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 2;

/// Now in UTC to the second, `2026-11-30T05:12:03Z`.
pub fn utc_now() -> String {
    utc(std::time::SystemTime::now())
}

/// Now in UTC to the millisecond, `2026-11-30T05:12:03.250Z` (a soak's intervals).
pub fn utc_now_millis() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

fn utc(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates_to_the_second() {
        let at = |secs, nanos| utc(std::time::UNIX_EPOCH + Duration::new(secs, nanos));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400, 999_999_999), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_796_008_323, 0), "2026-11-30T03:12:03Z");
    }
}
