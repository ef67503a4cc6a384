//! Log timestamps to seconds since the Unix epoch (UTC): the Common Log
//! Format's `10/Oct/2000:13:55:36 -0700`, ISO 8601 (nginx `$time_iso8601`)
//! and epoch numbers (`%{sec}t`, `%{msec}t`, `%{usec}t`, nginx `$msec`).
//! Sub-second parts are dropped: the replay spreads each second's requests
//! evenly over it (docs/replay.md).

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn num(s: &str, what: &str) -> Result<i64, String> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("bad time: the {what} is not a number"));
    }
    s.parse()
        .map_err(|_| format!("bad time: the {what} is out of range"))
}

fn seconds(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64, offset_s: i64) -> Result<i64, String> {
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err("bad time: a field is out of range".into());
    }
    if !(1970..=9999).contains(&y) {
        return Err("bad time: the year is out of range".into());
    }
    Ok(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset_s)
}

fn zone(z: &str) -> Result<i64, String> {
    if z == "Z" {
        return Ok(0);
    }
    let (sign, rest) = match z.as_bytes().first() {
        Some(b'+') => (1, &z[1..]),
        Some(b'-') => (-1, &z[1..]),
        _ => return Err("bad time: no time zone offset".into()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err("bad time: the time zone offset is not ±hhmm".into());
    }
    let h = num(&digits[..2], "zone")?;
    let m = num(&digits[2..], "zone")?;
    if h > 23 || m > 59 {
        return Err("bad time: the time zone offset is out of range".into());
    }
    Ok(sign * (h * 3600 + m * 60))
}

/// `10/Oct/2000:13:55:36 -0700`.
pub fn clf(v: &str) -> Result<i64, String> {
    let (dt, z) = v.split_once(' ').ok_or("bad time: no time zone")?;
    let mut it = dt.splitn(4, [':', '/']);
    let (d, mon, rest) = (it.next(), it.next(), it.next());
    let (Some(d), Some(mon), Some(y), Some(hms)) = (d, mon, rest, it.next()) else {
        return Err("bad time: expected dd/Mon/yyyy:HH:MM:SS".into());
    };
    let mo = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == mon)
    .ok_or("bad time: unknown month")? as i64
        + 1;
    let mut t = hms.split(':');
    let (Some(h), Some(mi), Some(s), None) = (t.next(), t.next(), t.next(), t.next()) else {
        return Err("bad time: expected HH:MM:SS".into());
    };
    seconds(
        num(y, "year")?,
        mo,
        num(d, "day")?,
        num(h, "hour")?,
        num(mi, "minute")?,
        num(s, "second")?,
        zone(z)?,
    )
}

/// `2000-10-10T13:55:36-07:00` (a fraction after the seconds is dropped).
pub fn iso8601(v: &str) -> Result<i64, String> {
    let (date, rest) = v
        .split_once('T')
        .ok_or("bad time: expected yyyy-mm-ddTHH:MM:SS")?;
    let mut d = date.split('-');
    let (Some(y), Some(mo), Some(dd), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err("bad time: expected yyyy-mm-dd".into());
    };
    let zpos = rest
        .find(['Z', '+', '-'])
        .ok_or("bad time: no time zone offset")?;
    let (time, z) = rest.split_at(zpos);
    let time = time.split('.').next().unwrap_or("");
    let mut t = time.split(':');
    let (Some(h), Some(mi), Some(s), None) = (t.next(), t.next(), t.next(), t.next()) else {
        return Err("bad time: expected HH:MM:SS".into());
    };
    seconds(
        num(y, "year")?,
        num(mo, "month")?,
        num(dd, "day")?,
        num(h, "hour")?,
        num(mi, "minute")?,
        num(s, "second")?,
        zone(z)?,
    )
}

/// An epoch number in units of `1/per` seconds, maybe with a fraction.
pub fn epoch(v: &str, per: i64) -> Result<i64, String> {
    let whole = v.split_once('.').map_or(v, |(w, _)| w);
    if whole.len() > 18 {
        return Err("bad time: the epoch number is out of range".into());
    }
    let n = num(whole, "epoch number")?;
    let s = n / per;
    if s > 253_402_300_799 {
        return Err("bad time: the epoch number is out of range".into());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_agree() {
        let a = clf("10/Oct/2000:13:55:36 -0700").unwrap();
        assert_eq!(a, 971_211_336);
        assert_eq!(iso8601("2000-10-10T13:55:36-07:00").unwrap(), a);
        assert_eq!(iso8601("2000-10-10T20:55:36.250Z").unwrap(), a);
        assert_eq!(epoch("971211336.123", 1).unwrap(), a);
        assert_eq!(epoch("971211336123", 1000).unwrap(), a);
        assert_eq!(clf("29/Feb/2024:00:00:00 +0000").unwrap(), 1_709_164_800);
        for bad in [
            "10/Oct/2000:13:55:36",
            "10/Foo/2000:13:55:36 +0000",
            "10/Oct/2000:25:55:36 +0000",
            "10/Oct/2000:13:55 +0000",
            "10/Oct/99999:13:55:36 +0000",
            "1a/Oct/2000:13:55:36 +0000",
        ] {
            assert!(clf(bad).is_err(), "{bad}");
        }
        assert!(epoch("99999999999999999999", 1).is_err());
    }
}
