//! The screen a page is discovered for (`--viewport WxH`, `--mobile`,
//! `--dpr N`) and the media queries evaluated against it: `media`
//! attributes, `@media` blocks, `@import … media`, `<source media>` and the
//! conditions of `sizes`. Only what a layout-free loader can know is
//! answered; an unknown feature or a malformed query does not match, as the
//! Media Queries spec says for unknown features.

/// Lighthouse's mobile preset (its "Moto G Power" screen emulation, the
/// default of Lighthouse 10+): 412×823 CSS px at a device pixel ratio of
/// 1.75. (Lighthouse before 10 emulated a Moto G4: 360×640 at 2.625.)
pub const MOBILE: Viewport = Viewport {
    width: 412,
    height: 823,
    dpr: 1.75,
    mobile: true,
};

/// The desktop default: 1350×940 CSS px at DPR 1 (Lighthouse's desktop preset).
pub const DESKTOP: Viewport = Viewport {
    width: 1350,
    height: 940,
    dpr: 1.0,
    mobile: false,
};

/// The emulated screen.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Viewport {
    /// Layout viewport width in CSS pixels.
    pub width: u32,
    /// Layout viewport height in CSS pixels.
    pub height: u32,
    /// Device pixel ratio (device pixels per CSS pixel).
    pub dpr: f64,
    /// A touch device (`hover: none`, `pointer: coarse`).
    pub mobile: bool,
}

impl Default for Viewport {
    fn default() -> Self {
        DESKTOP
    }
}

/// Parses `WxH` (CSS pixels, each 1..=16384).
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || {
        format!("invalid --viewport {s:?}: expected WIDTHxHEIGHT in CSS pixels (1 to 16384 each), e.g. 1350x940")
    };
    let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let n = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=16384).contains(n))
    };
    Ok((n(w).ok_or_else(bad)?, n(h).ok_or_else(bad)?))
}

/// Parses a device pixel ratio (0.5..=8).
pub fn parse_dpr(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|d| d.is_finite() && (0.5..=8.0).contains(d))
        .ok_or_else(|| format!("invalid --dpr {s:?}: expected a number from 0.5 to 8, e.g. 2"))
}

/// A CSS length in CSS pixels (px, em/rem as 16px, vw, vh, in, cm, mm, pt,
/// pc; a bare 0). None: not a length this loader can resolve (calc(), %…).
pub fn length_px(v: &str, vp: &Viewport) -> Option<f64> {
    let v = v.trim().to_ascii_lowercase();
    if v == "0" {
        return Some(0.0);
    }
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    let k = match unit {
        "px" => 1.0,
        "em" | "rem" => 16.0,
        "vw" | "svw" | "lvw" | "dvw" => f64::from(vp.width) / 100.0,
        "vh" | "svh" | "lvh" | "dvh" => f64::from(vp.height) / 100.0,
        "vmin" => f64::from(vp.width.min(vp.height)) / 100.0,
        "vmax" => f64::from(vp.width.max(vp.height)) / 100.0,
        "in" => 96.0,
        "cm" => 96.0 / 2.54,
        "mm" => 96.0 / 25.4,
        "pt" => 96.0 / 72.0,
        "pc" => 16.0,
        _ => return None,
    };
    Some(n * k)
}

fn resolution_dppx(v: &str) -> Option<f64> {
    let v = v.trim().to_ascii_lowercase();
    let (n, k) = if let Some(n) = v.strip_suffix("dppx") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("dpcm") {
        (n, 2.54 / 96.0)
    } else if let Some(n) = v.strip_suffix("dpi") {
        (n, 1.0 / 96.0)
    } else if let Some(n) = v.strip_suffix('x') {
        (n, 1.0)
    } else {
        (v.as_str(), 1.0)
    };
    n.trim().parse::<f64>().ok().map(|n| n * k)
}

fn ratio(v: &str) -> Option<f64> {
    let (a, b) = v.split_once('/').unwrap_or((v, "1"));
    let (a, b): (f64, f64) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (b != 0.0).then_some(a / b)
}

impl Viewport {
    /// Whether a media query list (`screen and (min-width: 40em), print`)
    /// matches. Empty: matches.
    pub fn matches_media(&self, list: &str) -> bool {
        let list = list.trim();
        if list.is_empty() {
            return true;
        }
        split_top(list, ',').iter().any(|q| self.query(q))
    }

    fn query(&self, q: &str) -> bool {
        let q = q.trim().to_ascii_lowercase();
        let (neg, rest) = if let Some(r) = q.strip_prefix("not ") {
            (true, r.trim())
        } else if let Some(r) = q.strip_prefix("only ") {
            (false, r.trim())
        } else {
            (false, q.as_str())
        };
        let v = if rest.starts_with('(') {
            self.condition(rest)
        } else {
            let (ty, cond) = match rest.split_once(char::is_whitespace) {
                Some((t, c)) => (t, c.trim()),
                None => (rest, ""),
            };
            let ty_ok = matches!(ty, "all" | "screen");
            let cond_ok = if cond.is_empty() {
                Some(true)
            } else {
                cond.strip_prefix("and")
                    .filter(|c| c.starts_with(char::is_whitespace) || c.starts_with('('))
                    .and_then(|c| self.condition(c.trim()))
            };
            cond_ok.map(|c| ty_ok && c)
        };
        match v {
            Some(v) => v != neg,
            None => false,
        }
    }

    /// A media condition: `(f)`, `not (f)`, `(a) and (b)`, `(a) or (b)`.
    /// None: malformed or unknown.
    pub fn condition(&self, c: &str) -> Option<bool> {
        let c = c.trim().to_ascii_lowercase();
        if let Some(r) = c.strip_prefix("not") {
            if r.starts_with(char::is_whitespace) || r.starts_with('(') {
                return self.condition(r).map(|v| !v);
            }
        }
        let parts = split_words(&c);
        if parts.len() == 1 {
            let p = parts[0].as_str();
            let inner = p.strip_prefix('(')?.strip_suffix(')')?;
            let t = inner.trim_start();
            if t.starts_with('(') || t.starts_with("not") {
                return self.condition(inner);
            }
            return self.feature(inner);
        }
        // (a) and (b) and (c) | (a) or (b)
        let mut acc: Option<bool> = None;
        let mut op: Option<&str> = None;
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 1 {
                if p != "and" && p != "or" || op.is_some_and(|o| o != p) {
                    return None;
                }
                op = Some(p);
                continue;
            }
            let v = self.condition(p)?;
            acc = Some(match (acc, op) {
                (None, _) => v,
                (Some(a), Some("or")) => a || v,
                (Some(a), _) => a && v,
            });
        }
        if parts.len().is_multiple_of(2) {
            return None;
        }
        acc
    }

    fn feature(&self, f: &str) -> Option<bool> {
        let f = f.trim();
        // Range syntax: (width >= 600px), (400px <= width < 800px).
        if f.contains(['<', '>']) || (f.contains('=') && !f.contains(':')) {
            return self.range(f);
        }
        let (name, value) = match f.split_once(':') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (f, None),
        };
        let (prefix, base) = if let Some(b) = name.strip_prefix("min-") {
            ("min", b)
        } else if let Some(b) = name.strip_prefix("max-") {
            ("max", b)
        } else if let Some(b) = name.strip_prefix("-webkit-min-") {
            ("min", b)
        } else if let Some(b) = name.strip_prefix("-webkit-max-") {
            ("max", b)
        } else {
            ("", name)
        };
        let ours = self.value_of(base)?;
        let Some(value) = value else {
            // Boolean context: true unless the value is zero/none.
            return Some(match ours {
                Val::Num(n) => n != 0.0,
                Val::Word(w) => w != "none",
            });
        };
        match ours {
            Val::Num(n) => {
                let want = self.parse_num(base, value)?;
                Some(match prefix {
                    "min" => n >= want - 1e-9,
                    "max" => n <= want + 1e-9,
                    _ => (n - want).abs() < 1e-9,
                })
            }
            Val::Word(w) => (prefix.is_empty()).then(|| w == value),
        }
    }

    fn range(&self, f: &str) -> Option<bool> {
        // Tokens: value op name [op value].
        let mut toks: Vec<String> = Vec::new();
        let mut cur = String::new();
        let mut chars = f.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '<' || c == '>' || c == '=' {
                if !cur.trim().is_empty() {
                    toks.push(cur.trim().to_string());
                }
                cur.clear();
                let mut op = c.to_string();
                if chars.peek() == Some(&'=') && c != '=' {
                    op.push('=');
                    chars.next();
                }
                toks.push(op);
            } else {
                cur.push(c);
            }
        }
        if !cur.trim().is_empty() {
            toks.push(cur.trim().to_string());
        }
        let is_op = |t: &str| matches!(t, "<" | "<=" | ">" | ">=" | "=");
        let cmp = |a: f64, op: &str, b: f64| match op {
            "<" => a < b,
            "<=" => a <= b + 1e-9,
            ">" => a > b,
            ">=" => a >= b - 1e-9,
            _ => (a - b).abs() < 1e-9,
        };
        let num_of = |name: &str| match self.value_of(name)? {
            Val::Num(n) => Some(n),
            Val::Word(_) => None,
        };
        match toks.as_slice() {
            [a, op, b] if is_op(op) => {
                if let Some(n) = num_of(a) {
                    Some(cmp(n, op, self.parse_num(a, b)?))
                } else {
                    let n = num_of(b)?;
                    Some(cmp(self.parse_num(b, a)?, op, n))
                }
            }
            [a, op1, name, op2, b] if is_op(op1) && is_op(op2) => {
                let n = num_of(name)?;
                Some(cmp(self.parse_num(name, a)?, op1, n) && cmp(n, op2, self.parse_num(name, b)?))
            }
            _ => None,
        }
    }

    fn parse_num(&self, feature: &str, v: &str) -> Option<f64> {
        match feature {
            "resolution" | "device-pixel-ratio" => resolution_dppx(v),
            "aspect-ratio" | "device-aspect-ratio" => ratio(v),
            "color" | "color-index" | "monochrome" | "grid" => v.trim().parse().ok(),
            _ => length_px(v, self),
        }
    }

    fn value_of(&self, feature: &str) -> Option<Val> {
        let (w, h) = (f64::from(self.width), f64::from(self.height));
        Some(match feature {
            "width" | "device-width" => Val::Num(w),
            "height" | "device-height" => Val::Num(h),
            "aspect-ratio" | "device-aspect-ratio" => Val::Num(w / h),
            "resolution" | "device-pixel-ratio" => Val::Num(self.dpr),
            "orientation" => Val::Word(if h >= w { "portrait" } else { "landscape" }),
            "color" => Val::Num(8.0),
            "color-index" | "monochrome" | "grid" => Val::Num(0.0),
            "hover" | "any-hover" => Val::Word(if self.mobile { "none" } else { "hover" }),
            "pointer" | "any-pointer" => Val::Word(if self.mobile { "coarse" } else { "fine" }),
            "prefers-color-scheme" => Val::Word("light"),
            "prefers-reduced-motion"
            | "prefers-reduced-transparency"
            | "prefers-reduced-data"
            | "prefers-contrast" => Val::Word("no-preference"),
            "forced-colors" | "inverted-colors" => Val::Word("none"),
            "scripting" => Val::Word("enabled"),
            "update" => Val::Word("fast"),
            "display-mode" => Val::Word("browser"),
            "color-gamut" => Val::Word("srgb"),
            "dynamic-range" | "video-dynamic-range" => Val::Word("standard"),
            "overflow-block" => Val::Word("scroll"),
            "overflow-inline" => Val::Word("scroll"),
            _ => return None,
        })
    }
}

enum Val {
    Num(f64),
    Word(&'static str),
}

/// Splits at `sep` outside parentheses.
pub fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Splits a condition into parenthesized groups and bare words.
fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '(' => {
                if depth == 0 && !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                    cur.clear();
                }
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
                if depth == 0 {
                    out.push(cur.trim().to_string());
                    cur.clear();
                }
            }
            c if c.is_whitespace() && depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
            }
            c => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        assert_eq!(parse_size("1350x940"), Ok((1350, 940)));
        assert_eq!(parse_size(" 412X823 "), Ok((412, 823)));
        for bad in ["", "1350", "0x10", "10x", "x10", "-1x5", "1e3x5", "99999x5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_dpr("2"), Ok(2.0));
        for bad in ["", "0", "nan", "inf", "9", "two"] {
            assert!(parse_dpr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn media_queries() {
        let d = DESKTOP;
        let m = MOBILE;
        let yes = |v: &Viewport, q: &str| assert!(v.matches_media(q), "{q} should match {v:?}");
        let no = |v: &Viewport, q: &str| assert!(!v.matches_media(q), "{q} should not match {v:?}");
        yes(&d, "");
        yes(&d, "all");
        yes(&d, "screen");
        no(&d, "print");
        yes(&d, "print, screen");
        yes(&d, "screen and (min-width: 768px)");
        no(&m, "screen and (min-width: 768px)");
        yes(&m, "(max-width: 40em)");
        no(&d, "(max-width: 40em)");
        yes(&d, "not print");
        no(&d, "not screen");
        yes(&d, "only screen and (orientation: landscape)");
        yes(&m, "(orientation: portrait)");
        yes(&m, "(min-resolution: 1.5dppx)");
        yes(&m, "(-webkit-min-device-pixel-ratio: 1.5)");
        no(&d, "(min-resolution: 2x)");
        yes(&d, "(width >= 1024px)");
        yes(&m, "(300px <= width < 500px)");
        no(&d, "(300px <= width < 500px)");
        yes(&d, "(hover: hover) and (pointer: fine)");
        yes(&m, "(hover: none)");
        no(&d, "(unknown-feature: 1)");
        no(&d, "screen and");
        yes(&d, "(min-width: 500px) or (max-width: 100px)");
        yes(&d, "(prefers-color-scheme: light)");
        no(&d, "(prefers-color-scheme: dark)");
    }
}
