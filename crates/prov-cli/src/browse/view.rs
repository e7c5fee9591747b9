//! Drawing the browser: the search line with the narrowings in force, the
//! command list, the selected command's files, a key help line, and a
//! lineage over them when asked.

use prov_export::text::relative_to;
use prov_model::escape::escape_text;
use prov_model::Access;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use super::model::{App, Focus, Source};

pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [top, middle, help] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)]).areas(frame.area());
    frame.render_widget(Paragraph::new(search_line(app)), top);
    let [list, files] = Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(middle);
    draw_commands(frame, app, list);
    draw_files(frame, app, files);
    let keys = match app.focus {
        Focus::Commands => "Enter choose  Tab files  ^F failed  ^D this dir  ^S session  ^T time  ^U clear  Esc quit",
        Focus::Files => "r readers  w writers  l lineage  Tab/Esc commands",
    };
    frame.render_widget(Paragraph::new(keys).style(Style::new().add_modifier(Modifier::DIM)), help);
    if let Some((title, text)) = &app.popup {
        let area = inset(frame.area());
        frame.render_widget(Clear, area);
        frame.render_widget(
            Paragraph::new(text.as_str())
                .block(Block::default().borders(Borders::ALL).title(format!(" {title}  (Esc back) ")))
                .scroll((app.popup_scroll, 0))
                .wrap(Wrap { trim: false }),
            area,
        );
    }
}

fn search_line(app: &App) -> Line<'_> {
    let mut spans = vec![Span::styled("search> ", Style::new().add_modifier(Modifier::BOLD)), Span::raw(&app.query)];
    let mut tags = Vec::new();
    match &app.source {
        Source::Journal => {}
        Source::Readers(p) => tags.push(format!("readers of {}", escape_text(p))),
        Source::Writers(p) => tags.push(format!("writers of {}", escape_text(p))),
    }
    if app.failed_only {
        tags.push("failed".into());
    }
    if let Some(d) = &app.below {
        tags.push(format!("in {}", escape_text(d)));
    }
    if let Some(s) = &app.session {
        tags.push(format!("session {}", short(s)));
    }
    if app.window != super::model::Window::All {
        tags.push(app.window.label().into());
    }
    let count = format!("{}/{}{}", app.shown.len(), app.entries().len(), if app.complete { "" } else { "+" });
    spans.push(Span::styled(
        format!("   [{count}{}{}]", if tags.is_empty() { "" } else { " " }, tags.join(", ")),
        Style::new().fg(Color::Cyan),
    ));
    Line::from(spans)
}

fn draw_commands(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let entries = app.entries();
    // Only the rows around the selection are built: the list may hold a
    // million commands.
    let height = area.height.saturating_sub(2) as usize;
    let first = app.selected.saturating_sub(height.saturating_sub(1));
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let items: Vec<ListItem<'_>> = app.shown[first..(first + height.max(1)).min(app.shown.len())]
        .iter()
        .map(|&i| {
            let c = &entries[i].row;
            let (mark, colour) = match c.exit_status {
                Some(0) => ("  ", Color::Green),
                Some(_) => ("✗ ", Color::Red),
                None => ("… ", Color::Yellow),
            };
            let text = escape_text(&c.text).replace('\n', "⏎");
            ListItem::new(Line::from(vec![
                Span::styled(mark, Style::new().fg(colour)),
                Span::styled(
                    format!("#{:<5} {:>11} {:>7}  ", c.id, when(c.start_ns, now_ns), took(c.start_ns, c.end_ns)),
                    Style::new().add_modifier(Modifier::DIM),
                ),
                Span::raw(text),
            ]))
        })
        .collect();
    let title = if app.shown.is_empty() { " no command matched ".to_string() } else { " commands ".to_string() };
    let mut state = ListState::default().with_selected(Some(app.selected - first));
    let border = if app.focus == Focus::Commands { Color::White } else { Color::DarkGray };
    frame.render_stateful_widget(
        List::new(items)
            .block(Block::default().borders(Borders::ALL).title(title).border_style(Style::new().fg(border)))
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .highlight_symbol("> "),
        area,
        &mut state,
    );
}

fn draw_files(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let mut lines: Vec<ListItem<'_>> = Vec::new();
    let mut title = " files ".to_string();
    if let Some(e) = app.current() {
        let c = &e.row;
        lines.push(ListItem::new(format!("in {}", escape_text(&c.cwd))));
        if let Some((_, files, total)) = app.files.as_ref().filter(|f| f.0 == c.id) {
            title = format!(" files ({total}) ");
            for f in files {
                let (verb, colour) = match f.access {
                    Access::Read => ("read ", Color::Blue),
                    Access::Write => ("wrote", Color::Magenta),
                };
                lines.push(ListItem::new(Line::from(vec![
                    Span::styled(verb, Style::new().fg(colour)),
                    Span::raw(format!(" {}", escape_text(relative_to(&f.path, &c.cwd)))),
                ])));
            }
            if (files.len() as u64) < *total {
                lines.push(ListItem::new(format!("… {} more", total - files.len() as u64)));
            }
        }
    }
    let selected = (app.focus == Focus::Files && app.files.is_some()).then_some(app.file_selected + 1);
    let mut state = ListState::default().with_selected(selected);
    let border = if app.focus == Focus::Files { Color::White } else { Color::DarkGray };
    frame.render_stateful_widget(
        List::new(lines)
            .block(Block::default().borders(Borders::ALL).title(title).border_style(Style::new().fg(border)))
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .highlight_symbol("> "),
        area,
        &mut state,
    );
}

/// Local date and time of a start, to the minute.
/// When a command started, as a person says it: how long ago within a
/// day, else the date and time.
fn when(ns: i64, now_ns: i64) -> String {
    use chrono::TimeZone;
    let ago = (now_ns - ns).max(0) / 1_000_000_000;
    match ago {
        0..60 => format!("{ago}s ago"),
        60..3600 => format!("{}m ago", ago / 60),
        3600..86400 => format!("{}h ago", ago / 3600),
        _ => chrono::Local.timestamp_nanos(ns).format("%m-%d %H:%M").to_string(),
    }
}

/// How long a command ran, or that it still runs.
fn took(start_ns: i64, end_ns: Option<i64>) -> String {
    let Some(end) = end_ns else { return "running".into() };
    let ms = (end - start_ns).max(0) / 1_000_000;
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

fn short(session: &str) -> &str {
    session.get(session.len().saturating_sub(8)..).unwrap_or(session)
}

fn inset(area: Rect) -> Rect {
    Rect {
        x: area.x + area.width / 10,
        y: area.y + area.height / 10,
        width: area.width - area.width / 5,
        height: area.height - area.height / 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_person_says_them() {
        let s = 1_000_000_000;
        assert_eq!(when(100 * s, 105 * s), "5s ago");
        assert_eq!(when(0, 125 * s), "2m ago");
        assert_eq!(when(0, 7300 * s), "2h ago");
        assert_eq!(took(0, Some(250_000_000)), "250ms");
        assert_eq!(took(0, Some(2_340_000_000)), "2.3s");
        assert_eq!(took(0, Some(125 * s)), "2m05s");
        assert_eq!(took(0, Some(3 * 3600 * s + 60 * s)), "3h01m");
        assert_eq!(took(0, None), "running");
    }
}
