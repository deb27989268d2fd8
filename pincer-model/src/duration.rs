//! Durations as pincer's files and command lines write them (`"500ms"`,
//! `"30s"`, `"1h30m"`, humantime's syntax), within bounds, with one set of
//! messages wherever one is read.

use std::{ops::RangeInclusive, time::Duration};

use humantime::DurationError;

use crate::toml_file::toml_string;

/// The smallest duration longer than zero: a lower bound of `POSITIVE..`
/// refuses zero with "must be longer than zero".
pub const POSITIVE: Duration = Duration::from_nanos(1);

/// Parses `text` as a duration within `bounds`. The messages say what to
/// write, not how the parser failed ("expected number at 0"):
///
/// - `invalid duration "x" (write it like "30s", "10m" or "1h30m")`;
/// - `duration "x" is too large` when it does not fit in a duration;
/// - `must be longer than zero` and `must be at most MAX (not D)` when the
///   bounds are [`POSITIVE`] or zero to a maximum;
/// - `must be from MIN to MAX (not D)` otherwise.
pub fn parse(text: &str, bounds: RangeInclusive<Duration>) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|cause| match cause {
        DurationError::NumberOverflow => format!("duration {} is too large", toml_string(text)),
        _ => format!(
            "invalid duration {} (write it like \"30s\", \"10m\" or \"1h30m\")",
            toml_string(text)
        ),
    })?;
    if bounds.contains(&duration) {
        return Ok(duration);
    }
    let (min, max) = (*bounds.start(), *bounds.end());
    let format = humantime::format_duration;
    Err(if min > POSITIVE {
        format!(
            "must be from {} to {} (not {})",
            format(min),
            format(max),
            format(duration)
        )
    } else if duration < min {
        "must be longer than zero".to_owned()
    } else {
        format!("must be at most {} (not {})", format(max), format(duration))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn durations_within_bounds() {
        assert_eq!(parse("1h30m", POSITIVE..=Duration::MAX), Ok(HOUR * 3 / 2));
        assert_eq!(parse("500ms", Duration::ZERO..=HOUR), Ok(SECOND / 2));
        assert_eq!(parse("0s", Duration::ZERO..=HOUR), Ok(Duration::ZERO));
    }

    #[test]
    fn one_set_of_messages() {
        for (text, bounds, message) in [
            (
                "soon",
                POSITIVE..=HOUR,
                "invalid duration \"soon\" (write it like \"30s\", \"10m\" or \"1h30m\")",
            ),
            (
                "99999999999999999999s",
                POSITIVE..=HOUR,
                "duration \"99999999999999999999s\" is too large",
            ),
            ("0s", POSITIVE..=HOUR, "must be longer than zero"),
            ("2h", POSITIVE..=HOUR, "must be at most 1h (not 2h)"),
            ("2h", Duration::ZERO..=HOUR, "must be at most 1h (not 2h)"),
            ("0s", SECOND..=HOUR, "must be from 1s to 1h (not 0s)"),
            ("1h 1s", SECOND..=HOUR, "must be from 1s to 1h (not 1h 1s)"),
        ] {
            assert_eq!(
                parse(text, bounds.clone()).unwrap_err(),
                message,
                "{text} in {bounds:?}"
            );
        }
    }
}
