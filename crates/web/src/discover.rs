//! Finding what a page loads, by the rules a browser follows for a given
//! screen ([`Viewport`]): a small, forgiving HTML tag scanner and a
//! [`Session`] that turns each fetched document, stylesheet and module into
//! the next fetches. Checked request for request against headless Chromium
//! by tests/browser.rs. What it follows:
//!
//! - Nothing inside `<template>`, `<noscript>` (scripting is on, so its
//!   content is raw text), comments or other raw-text elements.
//! - Scripts whose `type` is JavaScript or `module` (not `nomodule` ones);
//!   module graphs through static `import`/`export … from` (and the page's
//!   import map), transitively; `modulepreload` fetches the module alone;
//!   dynamic `import()` is noted as not followed.
//! - `<link>`: `stylesheet` (also `alternate stylesheet`, which Chromium
//!   fetches but does not apply; not `disabled` ones or a `type` other than
//!   text/css), every `icon` (else `/favicon.ico`), `manifest`, `preload`
//!   (with a valid `as`; `imagesrcset` chosen like `srcset`), `prefetch`,
//!   `modulepreload`; not `apple-touch-icon`, `mask-icon`, `prerender`,
//!   `dns-prefetch`, `preconnect` and the rest.
//! - `<video>`/`<audio>`: `src`, else the first `<source>` whose `type`
//!   plays (none with `preload=none`); `poster`. (A source that fails makes
//!   the browser try the next: not modelled.)
//! - `<object data>`, `<embed src>`, SVG `<image href>` and external `<use
//!   href>`, `<input type=image>`, `background` attributes.
//! - Images: one `srcset`/`sizes` candidate ([`crate::srcset`]); in
//!   `<picture>`, the first `<source>` whose `type` Chromium decodes and whose
//!   `media` matches. On a mobile screen a page without `<meta
//!   name=viewport content="width=device-width">` is laid out 980 px wide,
//!   as Chromium does.
//! - `loading=lazy` images and iframes below the first screen are deferred
//!   (listed, not fetched). Layout-free estimate: an element's top is the sum
//!   of the `height` attributes and inline `height`/`min-height` (px) of the
//!   elements before it, plus 20 px per paragraph-like block; it is deferred
//!   when that exceeds the viewport height plus Chromium's distance-from-
//!   viewport margin (1250 px for images, 4000 px for iframes; Chromium's
//!   values for a fast connection).
//! - Stylesheets are fetched whatever their media (as Chromium does, imports
//!   too), but only those that apply (media matching, not alternate) load
//!   images and fonts, and only once every stylesheet of the document has
//!   arrived: then the cascade runs on the element tree ([`crate::dom`]):
//!   each element's and `::before`/`::after` box's image properties go to
//!   the winning declaration (specificity, then order; `style` attributes
//!   last), nothing is loaded for boxes that `display: none`, `hidden` or
//!   the UA stylesheet take out, and a pseudo-element exists only with
//!   `content`. (Past [`crate::dom::MAX_NODES`] elements: the presence test
//!   [`crate::css::could_match`] and a cascade by selector text instead.)
//! - Fonts: for every rendered box (Chromium loads the primary font of an
//!   empty box too), the first family of its computed `font-family` that has
//!   an `@font-face`, at its computed weight and style (inherited; `h1`…`h6`,
//!   `b`, `strong`, `th` bold, `i`, `em`, `cite`… italic), the face CSS font
//!   matching picks, one `src` each ([`crate::css::font_src`]); of a
//!   family split by `unicode-range`, the segments that cover the box's
//!   characters (and U+0020, which picks the first available font).
//! - Not modelled: layout (a box off-screen or of zero size still loads
//!   its background), `:not()`/`:is()` contents and attribute selectors
//!   (taken as matching), `local()` fonts, scripts that fetch or insert
//!   elements, a failing `<source>` making the browser try the next; an
//!   image a later stylesheet overrides (Chromium sometimes fetches it
//!   anyway when a style pass ran before that sheet arrived: timing); and
//!   whatever decides Chromium's preload scanner beyond what is below.
//! - On a phone, a page without a device-width viewport `<meta>` (before
//!   its images) gets two candidates per responsive image when they differ:
//!   Chromium's preload scanner picks for the device width, layout for
//!   980 px, and both are fetched.
//! - Scope: never link-local addresses (169.254.0.0/16, fe80::/10) or cloud
//!   metadata names unless the page itself is there; `--same-origin` keeps
//!   every fetch on the page's origin. Skipped fetches are noted.
//!
//! A hand scanner, not an HTML5 tokenizer crate (html5ever, html5gum): the
//! loader needs references and a few attributes, never a tree; raw-text,
//! `<noscript>` and `<template>` handling are the only tree-builder rules
//! that change what is fetched, and they are a few lines here, tested
//! against Chromium.

use crate::css::{self, Presence, Sheet};
use crate::modules::{self, ImportMap};
use crate::viewport::{length_px, Viewport};
use std::collections::{HashMap, HashSet};
use url::Url;

mod markup;
mod scan;
mod session;
pub use markup::decode_entities;
use markup::{attr, dim, find_ci, is_name_byte, parse_attrs};
pub use scan::{scan_html, MAX_FRAME_DEPTH};
pub use session::{is_link_local_or_metadata, Found, Notes, Session, Skipped};

/// What an embedded reference is, which decides how it is fetched and parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The page itself, or an iframe's document.
    Document,
    /// `<iframe src>` (nested up to [`MAX_FRAME_DEPTH`]).
    Iframe,
    /// A stylesheet (`link rel=stylesheet`, CSS `@import`).
    Stylesheet,
    /// `<script src>`, `modulepreload`.
    Script,
    /// `<img>`, `<picture><source>`, `poster`, CSS `url()` images, icons.
    Image,
    /// A font (`preload as=font`, CSS `url()` of a font file).
    Font,
    /// A `<video>`/`<audio>` source (`src`, the `<source>` taken).
    Media,
    /// `link rel=preload` of another type, `<object>`, `<embed>`, `<track>`.
    #[default]
    Other,
}

impl Kind {
    /// The request destination a fetch of this kind has (its `Accept`).
    pub fn dest(self) -> crate::http::Dest {
        use crate::http::Dest;
        match self {
            Kind::Document | Kind::Iframe => Dest::Document,
            Kind::Stylesheet => Dest::Style,
            Kind::Script => Dest::Script,
            Kind::Image => Dest::Image,
            Kind::Font => Dest::Font,
            Kind::Media => Dest::Media,
            Kind::Other => Dest::Other,
        }
    }
}

/// One reference found in HTML or CSS.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Embed {
    /// The reference as written (entities decoded), not yet resolved.
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// `width` attribute of an `<img>` (CSS pixels), when a plain number.
    pub width: Option<u32>,
    /// `height` attribute of an `<img>`, when a plain number.
    pub height: Option<u32>,
    /// A module script (`type=module`, `modulepreload`): its imports count.
    pub module: bool,
    /// `modulepreload`: fetched alone, imports not followed.
    pub preload_only: bool,
    /// A stylesheet: its place among the document's sheets (cascade order)
    /// and whether it applies (media matches, not alternate).
    pub sheet: Option<(u32, bool)>,
}

/// What the HTML scanner found.
#[derive(Clone, Debug, Default)]
pub struct HtmlScan {
    /// References to fetch now, in document order, duplicates kept.
    pub embeds: Vec<Embed>,
    /// `loading=lazy` images and iframes below the first screen.
    pub deferred: Vec<Embed>,
    /// `<base href>`, if any.
    pub base: Option<String>,
    /// Bytes inside `<style>` elements.
    pub inline_style_bytes: usize,
    /// Bytes inside `<script>` elements without `src`.
    pub inline_script_bytes: usize,
    /// `<style>` contents with their place among the sheets and whether
    /// their `media` matches (their imports are fetched either way).
    pub styles: Vec<(u32, String, bool)>,
    /// `style` attributes (outside template/noscript).
    pub style_attrs: Vec<String>,
    /// `<iframe srcdoc>` documents.
    pub srcdocs: Vec<String>,
    /// Inline `<script type=module>` sources.
    pub inline_modules: Vec<String>,
    /// `<script type=importmap>` sources.
    pub import_maps: Vec<String>,
    /// Elements, ids and classes present.
    pub presence: Presence,
    /// The element tree (for the cascade).
    pub tree: crate::dom::Tree,
    /// A `<link rel=icon>` was declared.
    pub has_icon: bool,
    /// What blocks the first paint (Lighthouse's render-blocking
    /// resources), as written: stylesheets in the head that apply
    /// (media matches, not alternate) and classic scripts in the head
    /// without `async` or `defer`.
    pub blocking: Vec<String>,
    /// `<link rel=preconnect href>` as written.
    pub preconnects: Vec<String>,
    /// `<link rel=preload>`: the URL as written (the `imagesrcset` choice
    /// for images) and its `as`.
    pub preloads: Vec<(String, String)>,
    /// The screen the document is laid out on (mobile without a
    /// `width=device-width` viewport: 980 px wide).
    pub layout: Viewport,
}

#[cfg(test)]
mod tests;
