//! Block layout as far as it is known without a layout engine, for the
//! image checks: the box properties a page's CSS gives each element (the
//! cascade of `crate::dom`'s selectors, `!important`, the `style`
//! attribute), the width of a containing block (`%` and `calc()` of px, %,
//! vw… resolved down a chain of block boxes from the viewport, margins,
//! borders, padding and `box-sizing` included, and across a single-line
//! row of flex items by the flexbox rules), and bounds on where each
//! element's top lies in the page (block boxes stacked, heights known from
//! `height` or from images of known size). What needs full layout — flex
//! items sized by their content, grid, tables, inline-blocks, floats,
//! positioned boxes, text heights — is left unknown (`None`, or an open
//! upper bound), never guessed.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::dom::{matches_exactly, parse_selector, Selector, Tree};
use crate::viewport::{length_px, split_top, Viewport};

/// Properties kept (longhands; shorthands are expanded into them).
const PROPS: [&str; 30] = [
    "width",
    "max-width",
    "min-width",
    "height",
    "max-height",
    "min-height",
    "margin-top",
    "margin-right",
    "margin-bottom",
    "margin-left",
    "padding-top",
    "padding-right",
    "padding-bottom",
    "padding-left",
    "border-top-width",
    "border-right-width",
    "border-bottom-width",
    "border-left-width",
    "border-top-style",
    "border-right-style",
    "border-bottom-style",
    "border-left-style",
    "box-sizing",
    "display",
    "position",
    "flex-grow",
    "flex-shrink",
    "flex-basis",
    "flex-direction",
    "flex-wrap",
];
/// Also kept: `float` (index [`FLOAT`]).
const FLOAT: usize = PROPS.len();
const NPROPS: usize = PROPS.len() + 1;

fn prop_index(name: &str) -> Option<usize> {
    if name == "float" {
        return Some(FLOAT);
    }
    PROPS.iter().position(|p| *p == name)
}

const SIDES: [&str; 4] = ["top", "right", "bottom", "left"];

/// The longhands (index, value) of one declaration.
fn expand(name: &str, value: &str) -> Vec<(usize, String)> {
    let v = value.trim();
    let four = |prefix: &str, suffix: &str| -> Vec<(usize, String)> {
        let parts: Vec<&str> = split_top(v, ' ')
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        let pick = |k: usize| -> Option<&str> {
            match parts.len() {
                1 => Some(parts[0]),
                2 => Some(parts[k % 2]),
                3 => Some(parts[if k == 3 { 1 } else { k }]),
                4 => Some(parts[k]),
                _ => None,
            }
        };
        (0..4)
            .filter_map(|k| {
                let p = pick(k)?;
                prop_index(&format!("{prefix}-{}{suffix}", SIDES[k])).map(|i| (i, p.to_string()))
            })
            .collect()
    };
    match name {
        "flex" => flex_shorthand(v),
        "flex-flow" => {
            let mut out = Vec::new();
            for w in v.split_ascii_whitespace() {
                let lw = w.to_ascii_lowercase();
                let p = if lw.contains("wrap") {
                    "flex-wrap"
                } else {
                    "flex-direction"
                };
                out.extend(prop_index(p).map(|i| (i, lw)));
            }
            out
        }
        "margin" => four("margin", ""),
        "padding" => four("padding", ""),
        "border-width" => four("border", "-width"),
        "border-style" => four("border", "-style"),
        "border" | "border-top" | "border-right" | "border-bottom" | "border-left" => {
            // A width (or thin/medium/thick) and a style among the words.
            let mut width = "medium".to_string();
            let mut style = "none".to_string();
            for w in v.split_ascii_whitespace() {
                let lw = w.to_ascii_lowercase();
                if matches!(
                    lw.as_str(),
                    "none"
                        | "hidden"
                        | "dotted"
                        | "dashed"
                        | "solid"
                        | "double"
                        | "groove"
                        | "ridge"
                        | "inset"
                        | "outset"
                ) {
                    style = lw;
                } else if matches!(lw.as_str(), "thin" | "medium" | "thick")
                    || lw.starts_with(|c: char| c.is_ascii_digit() || c == '.')
                    || lw.starts_with("calc(")
                {
                    width = lw;
                }
            }
            let sides: Vec<usize> = match name.strip_prefix("border-") {
                Some(s) => SIDES.iter().position(|x| *x == s).into_iter().collect(),
                None => (0..4).collect(),
            };
            let mut out = Vec::new();
            for k in sides {
                for (suffix, val) in [("width", &width), ("style", &style)] {
                    if let Some(i) = prop_index(&format!("border-{}-{suffix}", SIDES[k])) {
                        out.push((i, val.clone()));
                    }
                }
            }
            out
        }
        _ => prop_index(name)
            .map(|i| vec![(i, v.to_string())])
            .unwrap_or_default(),
    }
}

/// `flex`'s longhands: `none` is `0 0 auto`, `auto` `1 1 auto`, `initial`
/// `0 1 auto`; one or two numbers set grow (and shrink) with a basis of 0;
/// a lone length is the basis with grow 1.
fn flex_shorthand(v: &str) -> Vec<(usize, String)> {
    let lw = v.trim().to_ascii_lowercase();
    let (g, sh, b) = match lw.as_str() {
        "none" => ("0", "0", "auto"),
        "auto" => ("1", "1", "auto"),
        "initial" => ("0", "1", "auto"),
        _ => {
            let parts: Vec<&str> = lw.split_ascii_whitespace().collect();
            let (nums, rest): (Vec<&str>, Vec<&str>) =
                parts.iter().partition(|p| p.parse::<f64>().is_ok());
            let basis = match rest.as_slice() {
                [] if nums.is_empty() => return Vec::new(),
                [] => "0%",
                [b] => b,
                _ => return Vec::new(),
            };
            (
                nums.first().copied().unwrap_or("1"),
                nums.get(1).copied().unwrap_or("1"),
                basis,
            )
        }
    };
    [("flex-grow", g), ("flex-shrink", sh), ("flex-basis", b)]
        .into_iter()
        .filter_map(|(k, v)| prop_index(k).map(|i| (i, v.to_string())))
        .collect()
}

/// One rule's declarations of the kept properties: (property, value, important).
type Decls = Vec<(usize, String, bool)>;

fn declarations(block: &str) -> Decls {
    let mut out = Vec::new();
    for decl in block.split(';') {
        let Some((k, v)) = decl.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let (v, important) = match v.to_ascii_lowercase().find("!important") {
            Some(p) => (v[..p].trim(), true),
            None => (v, false),
        };
        for (i, val) in expand(&k.trim().to_ascii_lowercase(), v) {
            out.push((i, val, important));
        }
    }
    out
}

/// A style rule with kept declarations.
pub(super) struct Rule {
    sel: Selector,
    decls: Decls,
}

/// At most this many rules are kept (a bound for hostile sheets).
const MAX_RULES: usize = 10_000;

/// The rules of a style sheet that set kept properties, `@media` blocks
/// that match `vp`, `@supports` and `@layer` included, in cascade order.
/// Only selectors matched exactly (no pseudo-elements or pseudo-classes).
pub(super) fn rules(css: &str, vp: &Viewport, out: &mut Vec<Rule>, depth: u8) {
    let mut css = css.to_string();
    while let Some(s) = css.find("/*") {
        let e = css[s + 2..].find("*/").map_or(css.len(), |e| s + 2 + e + 2);
        css.replace_range(s..e, " ");
    }
    let b = css.as_bytes();
    let mut i = 0;
    while i < b.len() && out.len() < MAX_RULES {
        let Some(open) = css[i..].find(['{', ';']).map(|p| i + p) else {
            break;
        };
        let prelude = css[i..open].trim();
        if b[open] == b';' {
            // `@import`, `@charset`: no block.
            i = open + 1;
            continue;
        }
        // The matching close brace.
        let (mut d, mut close) = (0i32, b.len());
        for (k, c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => d += 1,
                b'}' => {
                    d -= 1;
                    if d == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &css[open + 1..close.min(b.len())];
        if let Some(at) = prelude.strip_prefix('@') {
            let lower = at.to_ascii_lowercase();
            if depth < 8 {
                if let Some(q) = lower.strip_prefix("media") {
                    if vp.matches_media(q) {
                        rules(body, vp, out, depth + 1);
                    }
                } else if lower.starts_with("supports") || lower.starts_with("layer") {
                    rules(body, vp, out, depth + 1);
                }
            }
        } else {
            let decls = declarations(body);
            if !decls.is_empty() {
                for sel in split_top(prelude, ',') {
                    if let Some(sel) =
                        parse_selector(sel).filter(|s| s.pseudo.is_none() && !s.pseudo_class)
                    {
                        out.push(Rule {
                            sel,
                            decls: decls.clone(),
                        });
                    }
                }
            }
        }
        i = close + 1;
    }
}

/// A length as `px + pct`% of the containing block's width.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Lin {
    px: f64,
    pct: f64,
}

impl Lin {
    fn resolve(self, base: Option<f64>) -> Option<f64> {
        if self.pct == 0.0 {
            Some(self.px)
        } else {
            base.map(|b| self.px + self.pct * b / 100.0)
        }
    }
}

/// A value as layout reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Val {
    /// `auto`, `none`, `initial`, or not set.
    Auto,
    /// A length.
    Len(Lin),
    /// Something only full layout answers (`fit-content`, `min()`, `em` of
    /// an unknown font size…).
    Unknown,
}

/// Parses a length, a percentage or a `calc()` of them (`+ - * /` with
/// numbers), with `vw`/`vh` of `vp`.
pub(super) fn parse_len(v: &str, vp: &Viewport) -> Val {
    let v = v.trim().to_ascii_lowercase();
    if matches!(
        v.as_str(),
        "" | "auto" | "none" | "initial" | "unset" | "revert" | "normal"
    ) {
        return Val::Auto;
    }
    match calc(&v, vp, 0) {
        Some(l) => Val::Len(l),
        None => Val::Unknown,
    }
}

fn term(t: &str, vp: &Viewport) -> Option<Lin> {
    let t = t.trim();
    if let Some(p) = t.strip_suffix('%') {
        return p.trim().parse::<f64>().ok().map(|pct| Lin { px: 0.0, pct });
    }
    length_px(t, vp).map(|px| Lin { px, pct: 0.0 })
}

/// `calc()` (and plain terms) over linear lengths; None: not linear or malformed.
fn calc(v: &str, vp: &Viewport, depth: u8) -> Option<Lin> {
    let v = v.trim();
    if depth > 8 {
        return None;
    }
    let inner = v
        .strip_prefix("calc(")
        .or_else(|| v.strip_prefix("("))
        .and_then(|r| r.strip_suffix(')'));
    let Some(inner) = inner else {
        return term(v, vp);
    };
    // Sums at the top level: split at ` + ` / ` - ` outside parentheses.
    let b = inner.as_bytes();
    let (mut acc, mut sign, mut start, mut depth_p) = (Lin { px: 0.0, pct: 0.0 }, 1.0, 0, 0i32);
    let mut k = 0;
    while k <= b.len() {
        let at_end = k == b.len();
        let c = if at_end { b' ' } else { b[k] };
        match c {
            b'(' => depth_p += 1,
            b')' => depth_p -= 1,
            _ => {}
        }
        let op = !at_end
            && depth_p == 0
            && (c == b'+' || c == b'-')
            && k > 0
            && b[k - 1] == b' '
            && b.get(k + 1) == Some(&b' ');
        if op || at_end {
            let p = product(&inner[start..k], vp, depth)?;
            acc = Lin {
                px: acc.px + sign * p.px,
                pct: acc.pct + sign * p.pct,
            };
            sign = if c == b'-' { -1.0 } else { 1.0 };
            start = k + 1;
        }
        k += 1;
    }
    Some(acc)
}

/// A product of one length and numbers: `100% / 3`, `2 * 10px`.
fn product(s: &str, vp: &Viewport, depth: u8) -> Option<Lin> {
    let s = s.trim();
    let mut len: Option<Lin> = None;
    let mut factor = 1.0;
    // `a * b / c / d`: factors split at `*`, each a dividend and divisors.
    for factor_part in split_top(s, '*') {
        for (k, part) in split_top(factor_part, '/').into_iter().enumerate() {
            let part = part.trim();
            let divide = k > 0;
            if let Ok(n) = part.parse::<f64>() {
                if divide {
                    if n == 0.0 {
                        return None;
                    }
                    factor /= n;
                } else {
                    factor *= n;
                }
            } else {
                if len.is_some() || divide {
                    return None;
                }
                len = Some(calc(part, vp, depth + 1)?);
            }
        }
    }
    let l = len?;
    Some(Lin {
        px: l.px * factor,
        pct: l.pct * factor,
    })
}

/// How an element takes part in layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Disp {
    /// Not rendered.
    None,
    /// A block box in block flow (`block`, `list-item`, `flow-root`).
    Block,
    /// Inline content (`inline`, `contents`): lines of its block container.
    Inline,
    /// Anything laid out otherwise: flex, grid, table, inline-block…
    Other,
}

const UA_BLOCK: [&str; 34] = [
    "html",
    "body",
    "div",
    "p",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "figure",
    "figcaption",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "form",
    "hr",
    "pre",
    "address",
    "center",
    "details",
    "summary",
    "menu",
];
const UA_OTHER: [&str; 18] = [
    "table", "tbody", "thead", "tfoot", "tr", "td", "th", "caption", "button", "select",
    "textarea", "input", "fieldset", "legend", "iframe", "object", "video", "canvas",
];
const UA_NONE: [&str; 12] = [
    "head", "script", "style", "title", "meta", "link", "template", "noscript", "base", "datalist",
    "param", "dialog",
];

/// The UA stylesheet's vertical margins (px at the default 16 px font).
fn ua_margin_v(tag: &str) -> f64 {
    match tag {
        "body" => 8.0,
        "h1" => 21.44,
        "h2" => 19.92,
        "h3" => 18.72,
        "h4" => 21.28,
        "h5" => 22.178,
        "h6" => 24.97,
        "p" | "ul" | "ol" | "dl" | "blockquote" | "figure" | "pre" | "menu" => 16.0,
        "hr" => 8.0,
        _ => 0.0,
    }
}

/// The UA stylesheet's horizontal margin and padding of side `k` (1 right, 3 left).
fn ua_h(tag: &str, margin: bool, k: usize) -> f64 {
    match (tag, margin, k) {
        ("body", true, _) => 8.0,
        ("blockquote" | "figure", true, _) => 40.0,
        ("dd", true, 3) => 40.0,
        ("ul" | "ol" | "menu", false, 3) => 40.0,
        _ => 0.0,
    }
}

/// The items of a flex row (element index) and their content widths.
type FlexLine = Vec<(usize, f64)>;

/// The kept properties of one element after the cascade (value, and
/// whether it came from the page rather than the UA defaults).
type Computed = [Option<String>; NPROPS];

/// The page's CSS applied to its element tree on one screen.
pub(super) struct Layout<'a> {
    tree: &'a Tree,
    rules: &'a [Rule],
    vp: Viewport,
    styles: RefCell<HashMap<usize, Computed>>,
    widths: RefCell<HashMap<usize, Option<f64>>>,
    /// Each row flex container's items and their content widths.
    flex: RefCell<HashMap<usize, Option<FlexLine>>>,
}

/// Vertical bounds (CSS px from the top of the page): `lo` always known,
/// `hi` None when open.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Span {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound (None: no bound known).
    pub hi: Option<f64>,
}

impl Span {
    fn exact(v: f64) -> Span {
        Span { lo: v, hi: Some(v) }
    }
    fn add(self, o: Span) -> Span {
        Span {
            lo: self.lo + o.lo,
            hi: self.hi.zip(o.hi).map(|(a, b)| a + b),
        }
    }
    fn open(lo: f64) -> Span {
        Span { lo, hi: None }
    }
}

impl<'a> Layout<'a> {
    /// The layout of `tree` under `rules` on the layout viewport `vp`.
    pub(super) fn new(tree: &'a Tree, rules: &'a [Rule], vp: Viewport) -> Layout<'a> {
        Layout {
            tree,
            rules,
            vp,
            styles: RefCell::new(HashMap::new()),
            widths: RefCell::new(HashMap::new()),
            flex: RefCell::new(HashMap::new()),
        }
    }

    /// The winning value of each kept property on element `i`.
    fn computed(&self, i: usize) -> Computed {
        if let Some(c) = self.styles.borrow().get(&i) {
            return c.clone();
        }
        // (important, specificity, order) of each property's winner.
        type Key = (bool, (u32, u32, u32), u32);
        let mut best: Vec<Option<(Key, String)>> = vec![None; NPROPS];
        let put = |best: &mut Vec<Option<(Key, String)>>, p: usize, key: Key, v: &str| {
            if best[p].as_ref().is_none_or(|(k, _)| *k <= key) {
                best[p] = Some((key, v.to_string()));
            }
        };
        for (order, r) in self.rules.iter().enumerate() {
            if !matches_exactly(&r.sel, self.tree, i) {
                continue;
            }
            for (p, v, imp) in &r.decls {
                put(&mut best, *p, (*imp, r.sel.spec, order as u32), v);
            }
        }
        if let Some(style) = self.tree.nodes[i].style.as_deref() {
            for (p, v, imp) in declarations(style) {
                put(&mut best, p, (imp, (1000, 0, 0), u32::MAX), &v);
            }
        }
        let out: Computed = std::array::from_fn(|p| best[p].take().map(|(_, v)| v));
        self.styles.borrow_mut().insert(i, out.clone());
        out
    }

    fn get(&self, i: usize, name: &str) -> Option<String> {
        prop_index(name).and_then(|p| self.computed(i)[p].clone())
    }

    /// A length property of element `i` (`base`: the containing block's
    /// width for percentages); the UA default when the page sets none.
    fn len(&self, i: usize, name: &str, base: Option<f64>, ua: f64) -> Option<f64> {
        match self.get(i, name).map(|v| parse_len(&v, &self.vp)) {
            None => Some(ua),
            Some(Val::Auto) => Some(0.0),
            Some(Val::Len(l)) => l.resolve(base),
            Some(Val::Unknown) => None,
        }
    }

    /// How element `i` takes part in layout (its own `display`, `float`
    /// and `position`, not its ancestors').
    pub(super) fn disp(&self, i: usize) -> Disp {
        let n = &self.tree.nodes[i];
        let c = self.computed(i);
        let display = c[prop_index("display").expect("kept")]
            .as_deref()
            .map(str::to_ascii_lowercase);
        let hidden = n.hidden && display.is_none();
        if hidden || display.as_deref() == Some("none") {
            return Disp::None;
        }
        if display.is_none() && UA_NONE.contains(&n.tag.as_str()) {
            return Disp::None;
        }
        if self.is_out_of_flow(i) {
            return Disp::Other;
        }
        match display.as_deref().map(str::trim) {
            Some("block" | "list-item" | "flow-root") => Disp::Block,
            Some("inline" | "contents") => Disp::Inline,
            Some(_) => Disp::Other,
            None if UA_BLOCK.contains(&n.tag.as_str()) => Disp::Block,
            None if UA_OTHER.contains(&n.tag.as_str()) => Disp::Other,
            None => Disp::Inline,
        }
    }

    /// Whether `i` or an ancestor is not rendered.
    pub(super) fn not_rendered(&self, i: usize) -> bool {
        let mut at = Some(i);
        for _ in 0..512 {
            let Some(k) = at else { return false };
            if k > 0 && self.disp(k) == Disp::None {
                return true;
            }
            at = self.tree.nodes[k].parent;
        }
        false
    }

    /// The nearest ancestor of `i` that is not inline content.
    fn container(&self, i: usize) -> Option<usize> {
        let mut at = self.tree.nodes[i].parent;
        for _ in 0..512 {
            let k = at?;
            // A flex item is blockified whatever its `display`.
            if k == 0 || self.disp(k) != Disp::Inline || self.flex_parent(k).is_some() {
                return Some(k);
            }
            at = self.tree.nodes[k].parent;
        }
        None
    }

    /// Horizontal border (of a side with a style) plus padding, and margins,
    /// of `i`, percentages of `base`.
    fn h_edges(&self, i: usize, base: Option<f64>) -> Option<(f64, f64)> {
        let tag = self.tree.nodes[i].tag.as_str();
        let (mut bp, mut m) = (0.0, 0.0);
        for k in [1, 3] {
            let side = SIDES[k];
            bp += self.len(i, &format!("padding-{side}"), base, ua_h(tag, false, k))?;
            m += self.len(i, &format!("margin-{side}"), base, ua_h(tag, true, k))?;
            bp += self.border(i, k)?;
        }
        Some((bp, m))
    }

    /// The width of border side `k` (0 without a style).
    fn border(&self, i: usize, k: usize) -> Option<f64> {
        let side = SIDES[k];
        let style = self.get(i, &format!("border-{side}-style"));
        if style.is_none_or(|s| matches!(s.trim(), "none" | "hidden")) {
            return Some(0.0);
        }
        let w = self
            .get(i, &format!("border-{side}-width"))
            .unwrap_or_else(|| "medium".into());
        match w.trim() {
            "thin" => Some(1.0),
            "medium" => Some(3.0),
            "thick" => Some(5.0),
            v => match parse_len(v, &self.vp) {
                Val::Len(l) if l.pct == 0.0 => Some(l.px),
                _ => None,
            },
        }
    }

    /// The content width of block box `i` as a containing block; None when
    /// it needs layout redline does not do.
    pub(super) fn content_width(&self, i: usize) -> Option<f64> {
        if let Some(w) = self.widths.borrow().get(&i) {
            return *w;
        }
        let w = self.content_width_uncached(i);
        self.widths.borrow_mut().insert(i, w);
        w
    }

    fn content_width_uncached(&self, i: usize) -> Option<f64> {
        let avail = if i == 0 {
            f64::from(self.vp.width)
        } else {
            if let Some(p) = self.flex_parent(i) {
                // A flex item: its width is the flex container's to give.
                return self
                    .flex_line(p)?
                    .iter()
                    .find(|(k, _)| *k == i)
                    .map(|(_, w)| *w);
            }
            if !self.block_container(i) && !self.flex_box(i) {
                return None;
            }
            let c = self.container(i)?;
            if !self.block_container(c) {
                return None;
            }
            self.content_width(c)?
        };
        let (bp, m) = self.h_edges(i, Some(avail))?;
        let border_box = self
            .get(i, "box-sizing")
            .is_some_and(|b| b.trim().eq_ignore_ascii_case("border-box"));
        let spec = |name: &str| match self.get(i, name).map(|v| parse_len(&v, &self.vp)) {
            None | Some(Val::Auto) => Some(None),
            Some(Val::Len(l)) => Some(Some(
                l.resolve(Some(avail))? - if border_box { bp } else { 0.0 },
            )),
            Some(Val::Unknown) => None,
        };
        let mut w = spec("width")?.unwrap_or(avail - m - bp);
        if let Some(max) = spec("max-width")? {
            w = w.min(max);
        }
        if let Some(min) = spec("min-width")? {
            w = w.max(min);
        }
        Some(w.max(0.0))
    }

    /// The containing block width of element `i` when it sits in block flow
    /// (its nearest non-inline ancestor is a block box).
    pub(super) fn containing_width(&self, i: usize) -> Option<f64> {
        let c = self.container(i)?;
        if !self.block_container(c) {
            return None;
        }
        self.content_width(c)
    }

    /// A box whose width is known from its containing block and whose
    /// content flows in blocks: the root, a block box, or a float with a
    /// set `width` (a float's `auto` width shrinks to fit: unknown).
    fn block_container(&self, i: usize) -> bool {
        if self.flex_parent(i).is_some() {
            // A flex item (its `float` ignored, its `display` blockified)
            // holds block flow unless it lays out otherwise itself.
            return match self
                .get(i, "display")
                .map(|d| d.trim().to_ascii_lowercase())
            {
                None => !UA_OTHER.contains(&self.tree.nodes[i].tag.as_str()),
                Some(d) => matches!(
                    d.as_str(),
                    "block" | "inline" | "inline-block" | "flow-root" | "list-item"
                ),
            };
        }
        if i == 0 || self.disp(i) == Disp::Block {
            return true;
        }
        let c = self.computed(i);
        let (floats, positioned) = self.float_position(i);
        let shown = c[prop_index("display").expect("kept")]
            .as_deref()
            .is_none_or(|d| !d.trim().eq_ignore_ascii_case("none"));
        let sized = matches!(
            self.get(i, "width").map(|v| parse_len(&v, &self.vp)),
            Some(Val::Len(_))
        );
        floats && !positioned && shown && sized
    }

    /// `display: flex` on `i`, rendered.
    fn flex_display(&self, i: usize) -> bool {
        self.get(i, "display")
            .is_some_and(|d| d.trim().eq_ignore_ascii_case("flex"))
    }

    /// A block-level flex container in block flow: its own width is a
    /// block box's.
    fn flex_box(&self, i: usize) -> bool {
        self.flex_display(i) && !self.is_out_of_flow(i)
    }

    /// The flex container `i` is an item of, when its parent is one and it
    /// is in its flow (not absolutely positioned, rendered).
    fn flex_parent(&self, i: usize) -> Option<usize> {
        let p = self.tree.nodes[i].parent.filter(|&p| p > 0)?;
        if !self.flex_display(p) || self.float_position(i).1 || self.disp(i) == Disp::None {
            return None;
        }
        Some(p)
    }

    /// The content widths of the items of flex container `p`, cached.
    fn flex_line(&self, p: usize) -> Option<FlexLine> {
        if let Some(v) = self.flex.borrow().get(&p) {
            return v.clone();
        }
        let v = self.flex_line_uncached(p);
        self.flex.borrow_mut().insert(p, v.clone());
        v
    }

    /// CSS Flexbox §9.7 ("resolving flexible lengths") on a single row:
    /// each item's flex base size from `flex-basis` or its `width` (an
    /// image's `width` attribute too), clamped by `min-width`/`max-width`,
    /// the free space shared by `flex-grow`, or taken by `flex-shrink`
    /// weighted by the base sizes, items that hit a limit frozen and the
    /// rest shared again. None when it needs what redline does not lay
    /// out: a column, an item sized by its content (text, an image's own
    /// size), text directly in the container, more than one line, or an
    /// item shrunk below its base size whose minimum is its content
    /// (`min-width: auto`). Items that grow are assumed wider than their
    /// longest word.
    fn flex_line_uncached(&self, p: usize) -> Option<FlexLine> {
        struct Item {
            i: usize,
            base: f64,
            hyp: f64,
            min: f64,
            min_auto: bool,
            max: f64,
            replaced_min: Option<f64>,
            grow: f64,
            shrink: f64,
            edges: f64,
            frozen: bool,
            target: f64,
            violation: f64,
        }
        let row = self
            .get(p, "flex-direction")
            .is_none_or(|d| matches!(d.trim(), "row" | "row-reverse"));
        if !row || self.tree.nodes[p].text {
            return None;
        }
        let w = self.content_width(p)?;
        let mut items: Vec<Item> = Vec::new();
        for (j, n) in self.tree.nodes.iter().enumerate().skip(p + 1) {
            if n.parent != Some(p) {
                continue;
            }
            if items.len() >= 1000 {
                return None;
            }
            if self.flex_parent(j).is_none() {
                continue;
            }
            let (bp, m) = self.h_edges(j, Some(w))?;
            let border_box = self
                .get(j, "box-sizing")
                .is_some_and(|b| b.trim().eq_ignore_ascii_case("border-box"));
            let content = |l: Lin| -> Option<f64> {
                Some(l.resolve(Some(w))? - if border_box { bp } else { 0.0 })
            };
            // Some(None): auto; None: needs layout.
            let len = |name: &str| -> Option<Option<f64>> {
                match self.get(j, name).map(|v| parse_len(&v, &self.vp)) {
                    None | Some(Val::Auto) => Some(None),
                    Some(Val::Len(l)) => content(l).map(Some),
                    Some(Val::Unknown) => None,
                }
            };
            let attr_w = (n.tag == "img")
                .then(|| n.attrs.iter().find(|(k, _)| k == "width"))
                .flatten()
                .and_then(|(_, v)| v.trim().parse::<f64>().ok());
            let basis = match self
                .get(j, "flex-basis")
                .map(|b| b.trim().to_ascii_lowercase())
            {
                Some(b) if b == "content" => None,
                Some(b) if b != "auto" => match parse_len(&b, &self.vp) {
                    Val::Len(l) => Some(content(l)?),
                    Val::Auto => len("width")?,
                    Val::Unknown => return None,
                },
                _ => len("width")?,
            };
            let specified = len("width")?.or(attr_w);
            // An empty box (no text, no element inside: Sphinx's
            // `div.clearer`) is 0 wide by its content.
            let empty = || {
                !n.text
                    && !UA_OTHER.contains(&n.tag.as_str())
                    && n.tag != "img"
                    && !self
                        .tree
                        .nodes
                        .iter()
                        .skip(j + 1)
                        .any(|c| c.parent == Some(j))
            };
            let base = match basis.or(specified) {
                Some(b) => b,
                None if empty() => 0.0,
                None => return None,
            }
            .max(0.0);
            let min = len("min-width")?;
            let max = len("max-width")?.unwrap_or(f64::INFINITY);
            let num = |name: &str, d: f64| {
                self.get(j, name)
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|x| *x >= 0.0)
                    .unwrap_or(d)
            };
            items.push(Item {
                i: j,
                base,
                hyp: base.min(max).max(min.unwrap_or(0.0)),
                min: min.unwrap_or(0.0),
                min_auto: min.is_none(),
                max,
                // An image's automatic minimum is the smaller of its
                // specified and its own (intrinsic) width: the latter is
                // not known here, so only the former bounds it.
                replaced_min: (n.tag == "img").then_some(specified.unwrap_or(f64::INFINITY)),
                grow: num("flex-grow", 0.0),
                shrink: num("flex-shrink", 1.0),
                edges: bp + m,
                frozen: false,
                target: 0.0,
                violation: 0.0,
            });
        }
        let outer: f64 = items.iter().map(|it| it.hyp + it.edges).sum();
        let wraps = self
            .get(p, "flex-wrap")
            .is_some_and(|v| v.trim().starts_with("wrap"));
        if wraps && items.len() > 1 && outer > w {
            return None;
        }
        let growing = outer < w;
        for it in &mut items {
            let factor = if growing { it.grow } else { it.shrink };
            if factor == 0.0 || (growing && it.base > it.hyp) || (!growing && it.base < it.hyp) {
                it.frozen = true;
                it.target = it.hyp;
            }
        }
        let used = |items: &[Item]| -> f64 {
            items
                .iter()
                .map(|it| it.edges + if it.frozen { it.target } else { it.base })
                .sum()
        };
        let initial_free = w - used(&items);
        for _ in 0..=items.len() {
            if items.iter().all(|it| it.frozen) {
                break;
            }
            let mut free = w - used(&items);
            let factors: f64 = items
                .iter()
                .filter(|it| !it.frozen)
                .map(|it| if growing { it.grow } else { it.shrink })
                .sum();
            if factors < 1.0 && (initial_free * factors).abs() < free.abs() {
                free = initial_free * factors;
            }
            let scaled: f64 = items
                .iter()
                .filter(|it| !it.frozen)
                .map(|it| it.shrink * it.base)
                .sum();
            let mut total = 0.0;
            for it in items.iter_mut().filter(|it| !it.frozen) {
                let t = if growing {
                    it.base + free * it.grow / factors
                } else if scaled > 0.0 {
                    it.base + free * it.shrink * it.base / scaled
                } else {
                    it.base
                };
                it.target = t.min(it.max).max(it.min).max(0.0);
                it.violation = it.target - t;
                total += it.violation;
            }
            for it in items.iter_mut().filter(|it| !it.frozen) {
                it.frozen = if total.abs() < 1e-9 {
                    true
                } else if total > 0.0 {
                    it.violation > 0.0
                } else {
                    it.violation < 0.0
                };
            }
        }
        // Below what its content (or, for an image, its specified width)
        // may hold it at: not known.
        if items.iter().any(|it| {
            it.min_auto
                && (it.target < it.base.min(it.max) - 1e-9
                    || it
                        .replaced_min
                        .is_some_and(|m| it.target < m.min(it.max) - 1e-9))
        }) {
            return None;
        }
        Some(items.iter().map(|it| (it.i, it.target)).collect())
    }

    /// The CSS width of replaced element `i` (an `<img>`): Ok(Some) a width
    /// the page's CSS sets (or, for a flex item, the width the flex
    /// container gives it), Ok(None) none set (the attribute or intrinsic
    /// width shows), Err when it needs layout (a `%` or `calc()` whose
    /// containing block is not known). `cap`: its `max-width`, when known.
    pub(super) fn replaced_width(&self, i: usize) -> Result<(Option<f64>, Cap), ()> {
        if let Some(p) = self.flex_parent(i) {
            // A flex item: the row gives its width, or it is not known.
            return self
                .flex_line(p)
                .and_then(|line| line.iter().find(|(k, _)| *k == i).map(|(_, w)| *w))
                .map(|w| (Some(w), Cap::None))
                .ok_or(());
        }
        let base = self.containing_width(i);
        let border_box = self
            .get(i, "box-sizing")
            .is_some_and(|b| b.trim().eq_ignore_ascii_case("border-box"));
        let bp = if border_box {
            self.h_edges(i, base).map_or(0.0, |(bp, _)| bp)
        } else {
            0.0
        };
        let v = |name: &str| self.get(i, name).map(|v| parse_len(&v, &self.vp));
        let width = match v("width") {
            None | Some(Val::Auto) => None,
            Some(Val::Len(l)) => Some(l.resolve(base).ok_or(())? - bp),
            Some(Val::Unknown) => return Err(()),
        };
        let cap = match v("max-width") {
            None | Some(Val::Auto) => Cap::None,
            Some(Val::Len(l)) => match l.resolve(base) {
                Some(c) => Cap::Known(c - bp),
                None => Cap::Unknown,
            },
            Some(Val::Unknown) => Cap::Unknown,
        };
        Ok((width, cap))
    }

    /// The CSS height of element `i` in px, when a plain length sets it.
    pub(super) fn css_height(&self, i: usize) -> Option<f64> {
        match self.get(i, "height").map(|v| parse_len(&v, &self.vp)) {
            Some(Val::Len(l)) if l.pct == 0.0 => Some(l.px),
            _ => None,
        }
    }
}

/// A `max-width` on an image.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Cap {
    /// None set.
    None,
    /// At most this many CSS px.
    Known(f64),
    /// Set, but its value needs layout (`max-width: 100%` in a box of unknown width).
    Unknown,
}

/// Where each rendered element's top lies, for the elements the caller
/// asks about (`heights`: the displayed height of the images, by element).
pub(super) struct Tops {
    /// Bounds of the top of each element (by index), rendered ones only.
    pub top: HashMap<usize, Span>,
}

impl Layout<'_> {
    /// Bounds of every rendered element's top, stacking block boxes from
    /// the page's top; `img_h`: the displayed height of image elements
    /// whose height is known.
    pub(super) fn tops(&self, img_h: &HashMap<usize, f64>) -> Tops {
        let n = self.tree.nodes.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in self.tree.nodes.iter().enumerate() {
            if let Some(p) = node.parent {
                children[p].push(i);
            }
        }
        let mut tops = Tops {
            top: HashMap::new(),
        };
        let mut budget = 200_000u32;
        // html at 0; its box holds body.
        self.place(
            0,
            Span::exact(0.0),
            &children,
            img_h,
            &mut tops,
            &mut budget,
        );
        tops
    }

    /// Places element `i` (its margin box's top at `at`), its subtree, and
    /// returns its margin box's height (margins in `hi` only: they may
    /// collapse). A negative margin or an out-of-flow box makes `lo`
    /// minus infinity: nothing is known from above any more.
    fn place(
        &self,
        i: usize,
        at: Span,
        children: &[Vec<usize>],
        img_h: &HashMap<usize, f64>,
        tops: &mut Tops,
        budget: &mut u32,
    ) -> Span {
        if *budget == 0 {
            return Span::open(f64::NEG_INFINITY);
        }
        *budget -= 1;
        let node = &self.tree.nodes[i];
        let disp = if i == 0 { Disp::Block } else { self.disp(i) };
        if disp == Disp::None {
            return Span::exact(0.0);
        }
        let tag = node.tag.as_str();
        let base = self.containing_width(i);
        let margin = |name: &str| self.len(i, name, base, ua_margin_v(tag));
        let (mt, mb) = (margin("margin-top"), margin("margin-bottom"));
        let negative = |m: Option<f64>| m.is_some_and(|m| m < 0.0);
        let margins = match (mt, mb) {
            (Some(a), Some(b)) if a >= 0.0 && b >= 0.0 => Span {
                lo: 0.0,
                hi: Some(a + b),
            },
            _ if negative(mt) || negative(mb) => Span::open(f64::NEG_INFINITY),
            _ => Span::open(0.0),
        };
        let at = if negative(mt) {
            Span::open(f64::NEG_INFINITY)
        } else {
            at
        };
        // Padding and border above and below the content (unknown: open).
        let pb = |k: usize| -> Span {
            let side = SIDES[k];
            match (
                self.len(i, &format!("padding-{side}"), base, 0.0),
                self.border(i, k),
            ) {
                (Some(p), Some(b)) if p >= 0.0 && b >= 0.0 => Span::exact(p + b),
                _ => Span::open(0.0),
            }
        };
        let (pb_top, pb_bottom) = (pb(0), pb(2));
        // Where the border box starts: below the top margin, which may
        // collapse through its parent's.
        let border_top = at.add(Span {
            lo: 0.0,
            hi: mt.filter(|m| *m >= 0.0),
        });
        tops.top.insert(i, border_top);
        if tag == "img" {
            let h = match img_h.get(&i) {
                Some(h) => Span::exact(*h),
                None => Span::open(0.0),
            };
            return h.add(margins);
        }
        let content_top = border_top.add(pb_top);
        let css_h = self.css_height(i);
        let mut content = Span::exact(0.0);
        if node.text {
            // Text among the children: lines of unknown height, anywhere.
            content.hi = None;
        }
        let flow = matches!(disp, Disp::Block | Disp::Inline);
        // The line run being filled: at least its tallest item, at most
        // the sum of its items.
        let mut line = Span::exact(0.0);
        // Margins in `lo`: adjoining ones collapse to the largest, so a
        // bottom margin waits (`pending`) for the next box's top margin;
        // a box that may be empty lets margins collapse through it; the
        // first box's top margin may collapse into this box's own (no
        // padding or border above): not counted.
        let mut pending = 0.0f64;
        let mut collapsing_top = i != 0 && pb_top.lo == 0.0;
        let close =
            |content: &mut Span, line: &mut Span, pending: &mut f64, collapsing_top: &mut bool| {
                if line.lo > 0.0 {
                    content.lo += *pending + line.lo;
                    *pending = 0.0;
                    *collapsing_top = false;
                }
                content.hi = content.hi.zip(line.hi).map(|(a, b)| a + b);
                *line = Span::exact(0.0);
            };
        for &k in &children[i] {
            let kd = self.disp(k);
            if kd == Disp::None {
                continue;
            }
            if !flow {
                // Flex, grid, table…: a child lies somewhere in the box.
                let hi = css_h.and_then(|h| content_top.hi.map(|t| t + h));
                let h = self.place(
                    k,
                    Span {
                        lo: content_top.lo,
                        hi,
                    },
                    children,
                    img_h,
                    tops,
                    budget,
                );
                content.lo = content.lo.max(h.lo);
                content.hi = None;
                continue;
            }
            if self.is_out_of_flow(k) {
                self.place(
                    k,
                    Span::open(f64::NEG_INFINITY),
                    children,
                    img_h,
                    tops,
                    budget,
                );
                continue;
            }
            if self.inline_level(k, kd) {
                // On the current run of lines: at or below its start.
                let pos = Span {
                    lo: content_top.lo + content.lo + pending,
                    hi: content_top
                        .hi
                        .zip(content.hi)
                        .zip(line.hi)
                        .map(|((a, b), l)| a + b + l),
                };
                let h = self.place(k, pos, children, img_h, tops, budget);
                let kt = self.tree.nodes[k].tag.as_str();
                // A line holding an image is at most the image plus the
                // strut's descent below the baseline (< 8 px at the
                // default 16 px font); a `<br>` at most a line (< 24 px).
                let slack = match kt {
                    "img" => 8.0,
                    "br" => 24.0,
                    _ => 0.0,
                };
                line = Span {
                    lo: line.lo.max(h.lo),
                    hi: line.hi.zip(h.hi).map(|(a, b)| a + b + slack),
                };
                continue;
            }
            close(&mut content, &mut line, &mut pending, &mut collapsing_top);
            let (mt, mb) = self.margins_lo(k);
            let gap = if collapsing_top { 0.0 } else { pending.max(mt) };
            let at = Span {
                lo: content_top.lo + content.lo + gap,
                hi: content_top.hi.zip(content.hi).map(|(a, b)| a + b),
            };
            let h = self.place(k, at, children, img_h, tops, budget);
            if h.lo > 0.0 || h.lo.is_infinite() {
                content.lo += gap + h.lo;
                pending = mb;
                collapsing_top = false;
            } else if !collapsing_top {
                pending = pending.max(mt).max(mb);
            }
            content.hi = content.hi.zip(h.hi).map(|(a, b)| a + b);
        }
        close(&mut content, &mut line, &mut pending, &mut collapsing_top);
        if disp == Disp::Inline {
            // An inline box's content is lines of its container.
            return content;
        }
        let border_box = self
            .get(i, "box-sizing")
            .is_some_and(|b| b.trim().eq_ignore_ascii_case("border-box"));
        let mut inner = match css_h {
            Some(h) if border_box => Span::exact(h),
            Some(h) => pb_top.add(Span::exact(h)).add(pb_bottom),
            None => pb_top.add(content).add(pb_bottom),
        };
        match self.get(i, "min-height").map(|v| parse_len(&v, &self.vp)) {
            Some(Val::Len(l)) if l.pct == 0.0 => {
                inner.lo = inner.lo.max(l.px);
                inner.hi = inner.hi.map(|h| h.max(l.px));
            }
            _ => {}
        }
        match self.get(i, "max-height").map(|v| parse_len(&v, &self.vp)) {
            None | Some(Val::Auto) => {}
            Some(Val::Len(l)) if l.pct == 0.0 => {
                inner.lo = inner.lo.min(l.px);
                inner.hi = Some(inner.hi.map_or(l.px, |h| h.min(l.px)));
            }
            _ => inner.lo = 0.0,
        }
        inner.add(margins)
    }

    /// The top and bottom margins of `i` as far as known and not negative
    /// (else 0: [`Layout::place`] opens the bounds for a negative one).
    fn margins_lo(&self, i: usize) -> (f64, f64) {
        let base = self.containing_width(i);
        let tag = self.tree.nodes[i].tag.as_str();
        let m = |name: &str| {
            self.len(i, name, base, ua_margin_v(tag))
                .filter(|v| *v >= 0.0)
                .unwrap_or(0.0)
        };
        (m("margin-top"), m("margin-bottom"))
    }

    /// A child box of kind `kd` sits on lines (inline-level) rather than
    /// stacking as a block.
    fn inline_level(&self, k: usize, kd: Disp) -> bool {
        match kd {
            Disp::Inline => true,
            Disp::Block | Disp::None => false,
            Disp::Other => match self.get(k, "display") {
                Some(d) => d.trim().to_ascii_lowercase().starts_with("inline"),
                None => matches!(
                    self.tree.nodes[k].tag.as_str(),
                    "button"
                        | "select"
                        | "textarea"
                        | "input"
                        | "iframe"
                        | "object"
                        | "video"
                        | "canvas"
                ),
            },
        }
    }

    fn is_out_of_flow(&self, i: usize) -> bool {
        let (floats, positioned) = self.float_position(i);
        floats || positioned
    }

    /// Whether `i` floats, and whether it is absolutely or fixed positioned.
    fn float_position(&self, i: usize) -> (bool, bool) {
        let c = self.computed(i);
        let floats = c[FLOAT]
            .as_deref()
            .is_some_and(|f| !f.trim().eq_ignore_ascii_case("none"));
        let positioned = c[prop_index("position").expect("kept")]
            .as_deref()
            .is_some_and(|p| {
                matches!(p.trim().to_ascii_lowercase().as_str(), "absolute" | "fixed")
            });
        (floats, positioned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viewport::DESKTOP;

    #[test]
    fn calc_and_percentages() {
        let vp = DESKTOP;
        let l = |s: &str| match parse_len(s, &vp) {
            Val::Len(l) => (l.px, l.pct),
            v => panic!("{s}: {v:?}"),
        };
        assert_eq!(l("50%"), (0.0, 50.0));
        assert_eq!(l("calc(100% - 20px)"), (-20.0, 100.0));
        assert_eq!(l("calc(50vw + 10px)"), (685.0, 0.0));
        let (px, pct) = l("calc(100% / 3 - 2 * 8px)");
        assert!(
            px == -16.0 && (pct - 100.0 / 3.0).abs() < 1e-9,
            "{px} {pct}"
        );
        assert_eq!(l("calc((100% - 40px) / 2)"), (-20.0, 50.0));
        assert_eq!(parse_len("auto", &vp), Val::Auto);
        assert_eq!(parse_len("fit-content", &vp), Val::Unknown);
        assert_eq!(parse_len("calc(100% * 10px)", &vp), Val::Unknown);
        assert_eq!(parse_len("calc(1px / 0)", &vp), Val::Unknown);
        assert_eq!(parse_len("calc(", &vp), Val::Unknown);
    }
}
