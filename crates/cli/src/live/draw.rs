//! Draws a [`Model`] with ratatui: the header (command, stage, progress and
//! time left), requests/s over time (sparkline), latency percentiles over
//! time (chart), totals, status classes, error kinds and the step/event
//! log. Pure: a model in, a frame out (tested on ratatui's `TestBackend`).
//! Nothing is told by colour alone (`NO_COLOR` drops it): the latency lines
//! have their own marks (`•` p50, `▄` p90, `█` p99, named in the legend and
//! beside the numbers).

use super::model::Model;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Chart, Dataset, Gauge, GraphType, List, ListItem, Paragraph, Sparkline,
};
use ratatui::Frame;

/// The latency lines: (mark, name in the legend, marker), p50, p90, p99.
const LATENCY_MARKS: [(&str, &str, Marker); 3] = [
    ("•", "p50 •", Marker::Dot),
    ("▄", "p90 ▄", Marker::Bar),
    ("█", "p99 █", Marker::Block),
];

/// Latency in µs for people: `850µs`, `12.3ms`, `1.20s`.
fn lat(us: u64) -> String {
    redline_report::dur_us(us as f64)
}

/// Seconds for people: `4.2s`, `3m05s`.
fn secs(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        let s = s.round() as u64;
        if s < 3600 {
            format!("{}m{:02}s", s / 60, s % 60)
        } else {
            format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
        }
    }
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, m: &Model) {
    let [head, gauge, charts, bottom] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(13),
    ])
    .areas(f.area());
    header(f, head, m);
    progress(f, gauge, m);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    rate_chart(f, left, m);
    latency_chart(f, right, m);
    let [now, status, kinds, log] = Layout::horizontal([
        Constraint::Length(34),
        Constraint::Length(22),
        Constraint::Length(28),
        Constraint::Min(20),
    ])
    .areas(bottom);
    totals(f, now, m);
    statuses(f, status, m);
    error_kinds(f, kinds, m);
    events(f, log, m);
}

fn header(f: &mut Frame, area: Rect, m: &Model) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut stage = m.stage.clone();
    if let Some(s) = m.stage_now() {
        stage = format!("{stage}, {s}");
    }
    let keys = if m.quit_at_once {
        Span::styled(
            "q or Ctrl-C: quit at once",
            Style::default().fg(Color::DarkGray),
        )
    } else if m.stopping {
        Span::styled(
            "stopping: in-flight requests get up to 1 s (q or Ctrl-C again: quit at once)",
            Style::default().fg(Color::Yellow),
        )
    } else {
        Span::styled(
            "q or Ctrl-C: stop and print the report",
            Style::default().fg(Color::DarkGray),
        )
    };
    let lines = vec![
        Line::from(vec![
            Span::styled(m.title.clone(), bold),
            Span::raw("   "),
            keys,
        ]),
        Line::from(vec![Span::raw("now: "), Span::styled(stage, bold)]),
    ];
    f.render_widget(Paragraph::new(lines), area);
}

fn progress(f: &mut Frame, area: Rect, m: &Model) {
    let mut label = format!("elapsed {}", secs(m.elapsed_s));
    if let Some(d) = m.planned_duration_s {
        label.push_str(&format!(" of {}", secs(d)));
    }
    if let Some(n) = m.planned_requests {
        label.push_str(&format!(
            ", {} of {} requests",
            redline_report::count(m.completed + m.failed),
            redline_report::count(n)
        ));
    }
    if let Some(left) = m.time_left_s() {
        label.push_str(&format!(", time left {}", secs(left)));
    }
    let ratio = m.progress().unwrap_or(0.0);
    let label = match m.progress() {
        Some(p) => format!("progress {:.0}%: {label}", p * 100.0),
        None => format!("progress: {label} (no planned end)"),
    };
    f.render_widget(
        Gauge::default()
            .gauge_style(Style::default().fg(Color::Green).bg(Color::Black))
            .ratio(ratio)
            .label(label),
        area,
    );
}

fn rate_chart(f: &mut Frame, area: Rect, m: &Model) {
    let width = area.width.saturating_sub(2) as usize;
    let skip = m.seconds.len().saturating_sub(width);
    let data: Vec<u64> = m.seconds.iter().skip(skip).map(|s| s.requests).collect();
    let max = data.iter().copied().max().unwrap_or(0);
    let title = format!(
        " Requests/s over time (max {}, last {}s) ",
        redline_report::count(max),
        data.len()
    );
    f.render_widget(
        Sparkline::default()
            .block(Block::bordered().title(title))
            .data(&data)
            .max(max.max(1))
            .style(Style::default().fg(Color::Cyan)),
        area,
    );
}

fn latency_chart(f: &mut Frame, area: Rect, m: &Model) {
    // One point per cell: enough seconds to fill the width.
    let width = (area.width.saturating_sub(10) as usize).max(2);
    let skip = m.seconds.len().saturating_sub(width);
    let shown: Vec<_> = m.seconds.iter().skip(skip).collect();
    let pts = |g: fn(&super::model::Second) -> u64| -> Vec<(f64, f64)> {
        shown
            .iter()
            .filter(|s| s.requests > 0)
            .map(|s| (s.t as f64, g(s) as f64 / 1000.0))
            .collect()
    };
    let p50 = pts(|s| s.p50_us);
    let p90 = pts(|s| s.p90_us);
    let p99 = pts(|s| s.p99_us);
    let top_us = shown.iter().map(|s| s.p99_us).max().unwrap_or(0).max(1);
    let top = top_us as f64 / 1000.0 * 1.1;
    let (t0, t1) = match (shown.first(), shown.last()) {
        (Some(a), Some(b)) => (a.t as f64, (b.t as f64).max(a.t as f64 + 1.0)),
        _ => (0.0, 1.0),
    };
    // Each line its own mark, so they are told apart without colour.
    fn set<'a>(name: &'static str, data: &'a [(f64, f64)], mark: Marker, c: Color) -> Dataset<'a> {
        Dataset::default()
            .name(name)
            .marker(mark)
            .graph_type(GraphType::Line)
            .style(Style::default().fg(c))
            .data(data)
    }
    let chart = Chart::new(vec![
        set(LATENCY_MARKS[0].1, &p50, LATENCY_MARKS[0].2, Color::Green),
        set(LATENCY_MARKS[1].1, &p90, LATENCY_MARKS[1].2, Color::Yellow),
        set(LATENCY_MARKS[2].1, &p99, LATENCY_MARKS[2].2, Color::Red),
    ])
    // The marks are named in the title: no legend over the data.
    .legend_position(None)
    .block(Block::bordered().title(" Latency over time (• p50  ▄ p90  █ p99) "))
    .x_axis(
        Axis::default()
            .bounds([t0, t1])
            .labels([format!("{t0:.0}s"), format!("{t1:.0}s")]),
    )
    .y_axis(
        Axis::default()
            .bounds([0.0, top])
            .labels(["0".to_string(), lat((top * 1000.0) as u64)]),
    );
    f.render_widget(chart, area);
}

fn totals(f: &mut Frame, area: Rect, m: &Model) {
    let row = |k: &str, v: String| Line::from(vec![Span::raw(format!("{k:<16}")), Span::raw(v)]);
    let n = redline_report::count;
    // From the finished seconds only: one consistent picture (done is the
    // sum of the status classes, the rate is the last second's).
    let last = m.last_second();
    let title = match last {
        Some(s) => format!(" Totals to second {} ", s.t + 1),
        None => " Totals ".to_string(),
    };
    let mut lines = vec![row("done", n(m.done())), row("errors", n(m.seconds_errors))];
    match last {
        Some(s) => {
            lines.push(row(&format!("req/s (s {})", s.t + 1), n(s.requests)));
            lines.push(row(
                "bytes/s",
                s.bytes.map_or("-".into(), |b| {
                    format!("{}/s", redline_report::bytes(b as f64))
                }),
            ));
        }
        None => lines.push(row("req/s", "after 1s".into())),
    }
    if let Some(t) = m.target_now() {
        let sent = m
            .sent_rate
            .map(|r| format!("{r:.0} now"))
            .unwrap_or_else(|| "-".into());
        lines.push(row("target req/s", format!("{t:.0}")));
        lines.push(row("sent req/s", sent));
    }
    lines.push(row(
        "open conns now",
        m.open.map(n).unwrap_or_else(|| "-".into()),
    ));
    if let Some(a) = m.agents {
        lines.push(row("agents", a.to_string()));
    }
    match last {
        Some(s) if s.requests > 0 => {
            let known = |us: u64| if us > 0 { lat(us) } else { "-".into() };
            for (i, v) in [s.p50_us, s.p90_us, s.p99_us].into_iter().enumerate() {
                lines.push(row(&format!("  {}", LATENCY_MARKS[i].1), known(v)));
            }
        }
        _ => lines.push(row("p50 p90 p99", "after 1s".into())),
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn statuses(f: &mut Frame, area: Rect, m: &Model) {
    let colors = [
        Color::Gray,
        Color::Green,
        Color::Cyan,
        Color::Yellow,
        Color::Red,
    ];
    let mut lines: Vec<Line> = (0..5)
        .map(|i| {
            Line::from(vec![
                Span::styled(format!("{}xx", i + 1), Style::default().fg(colors[i])),
                Span::raw(format!(" {:>12}", redline_report::count(m.status[i]))),
            ])
        })
        .collect();
    lines.push(Line::from(format!(
        "sum {:>12}",
        redline_report::count(m.done())
    )));
    lines.push(Line::from(format!(
        "err {:>12}",
        redline_report::count(m.seconds_errors)
    )));
    let title = match m.last_second() {
        Some(s) => format!(" Status to s {} ", s.t + 1),
        None => " Status ".to_string(),
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

/// Failed requests by kind, live (most first).
fn error_kinds(f: &mut Frame, area: Rect, m: &Model) {
    let rows = area.height.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = if m.error_kinds.is_empty() {
        vec![Line::from("none")]
    } else {
        m.error_kinds
            .iter()
            .take(rows)
            .map(|(k, v)| Line::from(format!("{k:<18}{:>8}", redline_report::count(*v))))
            .collect()
    };
    if m.error_kinds.len() > rows && rows > 0 {
        lines.truncate(rows - 1);
        lines.push(Line::from(format!(
            "… {} more kinds",
            m.error_kinds.len() - (rows - 1)
        )));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Errors by kind, now ")),
        area,
    );
}

fn events(f: &mut Frame, area: Rect, m: &Model) {
    let rows = area.height.saturating_sub(2) as usize;
    let skip = m.log.len().saturating_sub(rows);
    let items: Vec<ListItem> = m
        .log
        .iter()
        .skip(skip)
        .map(|l| ListItem::new(l.as_str()))
        .collect();
    f.render_widget(
        List::new(items).block(Block::bordered().title(" Steps and events ")),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::super::model::{Model, Second};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn screen(m: &Model, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| super::draw(f, m)).unwrap();
        let b = t.backend().buffer().clone();
        let mut s = String::new();
        for y in 0..h {
            for x in 0..w {
                s.push_str(b[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    }

    fn model() -> Model {
        let mut m = Model::new("redline run http://127.0.0.1:1/");
        m.begin("run", Some(10.0), None, None);
        for t in 0..4 {
            m.push_second(Second {
                t,
                requests: 1000 + t as u64,
                errors: 1,
                p50_us: 800,
                p90_us: 1500,
                p99_us: 4200,
                status: [0, 990 + t as u64, 0, 10, 0],
                bytes: Some(2 * 1024 * 1024),
            });
        }
        m
    }

    #[test]
    fn shows_rates_latency_status_and_progress() {
        let mut m = model();
        // The live totals run ahead of the finished seconds: the frame shows
        // the seconds' (done 4,006 = the sum of the classes), not 4,500.
        m.snapshot(4.4, 4500, 7, Some(50), &[]);
        m.error_kinds = vec![("refused", 5), ("timeout", 2)];
        m.log("step 1 ...");
        let s = screen(&m, 120, 40);
        for want in [
            "redline run http://127.0.0.1:1/",
            "progress 44%",
            "Totals to second 4",
            "req/s (s 4)",
            "Requests/s",
            "p50 •",
            "p90 ▄",
            "p99 █",
            "4.20ms",
            "2xx",
            "3,966",
            "4xx",
            "sum",
            "4,006",
            "bytes/s",
            "2.00 MiB/s",
            "open conns now",
            "Errors by kind, now",
            "refused",
            "timeout",
            "step 1 ...",
        ] {
            assert!(s.contains(want), "{want:?} not on the screen:\n{s}");
        }
        assert!(!s.contains("4,500"), "live count beside the seconds':\n{s}");
        // Closed loop: no target rate.
        assert!(!s.contains("target req/s"), "{s}");
    }

    #[test]
    fn open_loop_shows_target_and_sent_rate() {
        let mut m = model();
        m.target_rate = Some(800.0);
        m.sent_rate = Some(796.4);
        let s = screen(&m, 120, 40);
        assert!(s.contains("target req/s    800"), "{s}");
        assert!(s.contains("sent req/s      796 now"), "{s}");
    }

    /// Without colour (a terminal that has none, or NO_COLOR) the three
    /// latency lines still differ: each has its own mark on the chart.
    #[test]
    fn latency_lines_differ_without_colour() {
        let s = screen(&model(), 120, 40);
        let chart: String = s
            .lines()
            .skip(3)
            .take(20)
            .map(|l| l.chars().skip(60).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n");
        for mark in ["•", "▄", "█"] {
            assert!(chart.contains(mark), "{mark} not on the chart:\n{chart}");
        }
    }

    #[test]
    fn tiny_and_empty_screens_do_not_panic() {
        let m = Model::new("x");
        for (w, h) in [(1, 1), (10, 5), (40, 12), (200, 60)] {
            let _ = screen(&m, w, h);
        }
    }
}
