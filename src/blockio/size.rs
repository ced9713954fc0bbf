//! Byte sizes as people write them: `512MiB`, `1.5 GiB`, `1000000`.
//!
//! Only binary units are accepted. `KB`, `MB`, `GB` (and `K`, `M`, `G`) mean
//! powers of 1000 to some tools and powers of 1024 to others; a budget that
//! is silently off by 7% is worse than a refused argument, so they are refused
//! with a message that lists the accepted units.

/// The units `parse_size` accepts, largest first, with their size in bytes.
const UNITS: [(&str, u64); 5] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];

/// Most fractional digits accepted (`1.123456789GiB` is already silly).
const FRACTION_DIGITS_MAX: u32 = 9;

const ACCEPTED: &str = "KiB, MiB, GiB, TiB, or plain bytes";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("empty size")]
    Empty,
    #[error("size {text:?}: not a number")]
    NotANumber { text: String },
    #[error("size {text:?}: unit {unit:?} is not accepted (use {ACCEPTED})")]
    UnknownUnit { text: String, unit: String },
    #[error("size {text:?}: too large")]
    TooLarge { text: String },
    #[error("size {text:?}: not a whole number of bytes")]
    Fractional { text: String },
}

/// Parses `512MiB`, `2GiB`, `64KiB`, `1.5GiB`, `1000000`, `4096B` (a space
/// before the unit is allowed, units are case-sensitive).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(SizeError::Empty);
    }
    let number_end = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(number_end);
    let unit = unit.trim_start();
    let unit_bytes = if unit.is_empty() {
        1
    } else {
        match UNITS.iter().find(|(name, _)| *name == unit) {
            Some(&(_, bytes)) => bytes,
            None => {
                return Err(SizeError::UnknownUnit { text: text.to_string(), unit: unit.to_string() });
            }
        }
    };
    let not_a_number = || SizeError::NotANumber { text: text.to_string() };
    let too_large = || SizeError::TooLarge { text: text.to_string() };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_ok(whole) || !digits_ok(fraction) {
        return Err(not_a_number());
    }
    if fraction.len() > FRACTION_DIGITS_MAX as usize {
        return Err(SizeError::Fractional { text: text.to_string() });
    }
    let whole_value: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| too_large())? };
    let mut bytes = whole_value.checked_mul(unit_bytes).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        // Exact arithmetic: fraction_value / 10^digits of a unit must be a
        // whole number of bytes. u128 holds 10^9 * 2^40 easily.
        let fraction_value: u128 = fraction.parse().map_err(|_| not_a_number())?;
        let scale = 10u128.pow(fraction.len() as u32);
        let numerator = fraction_value * u128::from(unit_bytes);
        if !numerator.is_multiple_of(scale) {
            return Err(SizeError::Fractional { text: text.to_string() });
        }
        let extra = u64::try_from(numerator / scale).map_err(|_| too_large())?;
        bytes = bytes.checked_add(extra).ok_or_else(too_large)?;
    }
    Ok(bytes)
}

/// Formats a size with the largest binary unit it reaches and at most two
/// decimals: `32 MiB`, `1.5 GiB`, `976.56 KiB`, `100 B`. Not exact when more
/// decimals would be needed (it is for messages, not for round trips).
pub fn format_size(bytes: u64) -> String {
    let &(name, unit) = UNITS.iter().find(|&&(_, unit)| bytes >= unit).unwrap_or(&UNITS[UNITS.len() - 1]);
    if unit == 1 {
        return format!("{bytes} B");
    }
    // Hundredths of the unit, rounded to nearest.
    let hundredths = (u128::from(bytes) * 100 + u128::from(unit) / 2) / u128::from(unit);
    let whole = hundredths / 100;
    let fraction = hundredths % 100;
    if fraction == 0 {
        format!("{whole} {name}")
    } else if fraction % 10 == 0 {
        format!("{whole}.{} {name}", fraction / 10)
    } else {
        format!("{whole}.{fraction:02} {name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_plain_bytes() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("1000000"), Ok(1_000_000));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size(".5KiB"), Ok(512));
        assert_eq!(parse_size(" 32 MiB "), Ok(32 << 20));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn refuses_ambiguous_units_and_listing_accepted_ones() {
        for text in ["1GB", "1MB", "1KB", "1G", "1k", "1gib", "1 Mb"] {
            let error = parse_size(text).unwrap_err();
            assert!(matches!(error, SizeError::UnknownUnit { .. }), "{text}");
            let message = error.to_string();
            assert!(message.contains("KiB, MiB, GiB, TiB"), "{message}");
        }
    }

    #[test]
    fn refuses_bad_numbers() {
        assert_eq!(parse_size(""), Err(SizeError::Empty));
        assert_eq!(parse_size("   "), Err(SizeError::Empty));
        for text in ["MiB", ".", "1.2.3MiB", "-1", "+5"] {
            let error = parse_size(text).unwrap_err();
            assert!(matches!(error, SizeError::NotANumber { .. } | SizeError::UnknownUnit { .. }), "{text}: {error:?}");
        }
        assert!(matches!(parse_size("1.5"), Err(SizeError::Fractional { .. })));
        assert!(matches!(parse_size("1.3KiB"), Err(SizeError::Fractional { .. })));
        assert!(matches!(parse_size("99999999999999999999"), Err(SizeError::TooLarge { .. })));
        assert!(matches!(parse_size("16777216TiB"), Err(SizeError::TooLarge { .. })));
    }

    #[test]
    fn formats_with_largest_unit() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(100), "100 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(32 << 20), "32 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(1_000_000), "976.56 KiB");
        assert_eq!(format_size(5 << 40), "5 TiB");
        assert_eq!(format_size(u64::MAX), "16777216 TiB");
    }

    #[test]
    fn formatted_exact_sizes_parse_back() {
        for bytes in [0, 4096, 32 << 20, 3 << 29, 1 << 40, 1536] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }
}
