/*
 * The bash history subsystem of the shim: see bash_history.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bash_history.h"
#include "shim_parse.h"
#include "shim_shell.h"

struct hist_entry { char *line; char *timestamp; void *data; };
static struct {
    int ready;
    struct hist_entry *(*get)(int);     /* history_get(history_base + i) */
    struct hist_entry *(*remove)(int);  /* remove_history(i) */
    void *(*free_entry)(struct hist_entry *);
    void (*delete_histent)(int);        /* bash >= 5.0: remove + bookkeeping */
    int *length, *base, *lines_this_session, *remember, *enable_list;
    int next;                   /* number the line being read starts at */
    struct buf rules;           /* HISTCONTROL\0HISTIGNORE\0HISTSIZE\0 */
    int keep_line;              /* history off: keep the line being read */
    int started;                /* the first bash_line_start set `next` */
    int mark_pending;           /* set `next` when the line editor waits */
    char **rl_line_buffer;      /* readline's line, as edited */
    int *rl_readline_state;
    int reading;                /* between the mark and the command's start */
    struct buf typed;           /* the lines as typed, newline-terminated */
} H;

static int bash_history_ready(void)
{
    if (!H.ready && shim_shell_is_bash()) {
        H.get = (struct hist_entry * (*)(int)) dlsym(RTLD_DEFAULT, "history_get");
        H.remove = (struct hist_entry * (*)(int)) dlsym(RTLD_DEFAULT, "remove_history");
        H.free_entry = (void *(*)(struct hist_entry *))dlsym(RTLD_DEFAULT, "free_history_entry");
        H.delete_histent = (void (*)(int))dlsym(RTLD_DEFAULT, "bash_delete_histent");
        H.length = (int *)dlsym(RTLD_DEFAULT, "history_length");
        H.base = (int *)dlsym(RTLD_DEFAULT, "history_base");
        H.lines_this_session = (int *)dlsym(RTLD_DEFAULT, "history_lines_this_session");
        H.remember = (int *)dlsym(RTLD_DEFAULT, "remember_on_history");
        H.enable_list = (int *)dlsym(RTLD_DEFAULT, "enable_history_list");
        H.rl_line_buffer = (char **)dlsym(RTLD_DEFAULT, "rl_line_buffer");
        H.rl_readline_state = (int *)dlsym(RTLD_DEFAULT, "rl_readline_state");
        H.ready = H.get && H.remove && H.free_entry && H.length && H.base && H.remember && H.enable_list;
    }
    return H.ready;
}

/* Removes entry i of the list. `added` is an entry bash added only because
 * the settings were neutralised: bash's count of this session's lines
 * (what `history -a` appends) goes back down with it. An older copy removed
 * for erasedups does not change that count, as in bash's own erasedups. */
static void delete_entry(int i, int added)
{
    if (added && H.delete_histent) { H.delete_histent(i); return; }
    struct hist_entry *e = H.remove(i);
    if (e) {
        H.free_entry(e);
        if (added && H.lines_this_session && *H.lines_this_session > 0) (*H.lines_this_session)--;
    }
}

static const char *line_at(int i)
{
    struct hist_entry *e = i >= 0 && i < *H.length ? H.get(*H.base + i) : NULL;
    return e && e->line ? e->line : NULL;
}

/* The user's settings, as taken at bash_line_start, parsed into `r` (pointing
 * into `data`). */
static void read_rules(struct hist_rules *r, struct buf *data)
{
    static char none[3];
    parse_hist_rules(r, none);
    if (buf_reserve(data, H.rules.len + 3)) return;
    if (H.rules.len) memcpy(data->p, H.rules.p, H.rules.len);
    memset(data->p + H.rules.len, 0, 3);
    parse_hist_rules(r, data->p);
}

/* The user's HISTCONTROL, HISTIGNORE and HISTSIZE, as bash_prompt.c took
 * them (the real ones are neutralised while a line is read). */
static void take_rules(const char *const values[3])
{
    H.rules.len = 0;
    for (size_t i = 0; i < 3; i++) {
        if (buf_str(&H.rules, values[i]) || buf_add(&H.rules, "", 1)) {
            H.rules.len = 0;
            return;
        }
    }
}

/* A multi-line command is one history entry joined with `;` (bash's
 * default cmdhist, without lithist). The lines as typed are what
 * readline's buffer holds when the key that ends a line is read (readline
 * reads one byte at a time): kept from the mark on, and used as the text
 * when they are the entry's words, in the same order. */
static void typed_reset(void) { buf_free(&H.typed); }

/* readline reads more input inside a command (a bracketed paste, a quoted
 * insert): such a newline does not end the line. */
#define RL_STATE_MOREINPUT 0x0000040

void bash_typed_key(const char *key, ssize_t got)
{
    if (got == 1 && H.reading && (*key == '\n' || *key == '\r') && H.rl_line_buffer && *H.rl_line_buffer
        && H.rl_readline_state && !(*H.rl_readline_state & RL_STATE_MOREINPUT) && shim_in_shell_itself()) {
        if (buf_str(&H.typed, *H.rl_line_buffer) == 0) buf_add(&H.typed, "\n", 1);
    }
}

/* The entries bash added for the line just read (several with `shopt -u
 * cmdhist`), joined by newlines into `text`; those the user's settings
 * would have kept out are deleted, as are all of them with history off. */
static void line_text(struct buf *text)
{
    if (!H.started) return;
    struct hist_rules r;
    struct buf rules = {0};
    read_rules(&r, &rules);
    int first = H.next - *H.base;
    if (first < 0) first = 0;
    for (int i = first; i < *H.length; i++) {
        const char *line = line_at(i);
        if (!line) continue;
        if (text->len) buf_add(text, "\n", 1);
        buf_str(text, line);
    }
    /* bash applies the settings to a command's first line; its other lines
     * (one entry each with `shopt -u cmdhist`) follow that decision. */
    const char *head = line_at(first), *previous = line_at(first - 1);
    int drop = H.keep_line || r.size == 0
        || (head && ((r.ignorespace && head[0] == ' ') || (r.ignoredups && previous && !strcmp(head, previous))
                     || ignored_by_pattern(&r, head, previous)));
    if (drop) {
        for (int i = *H.length - 1; i >= first; i--) delete_entry(i, 1);
    } else if (head && r.erasedups) {
        /* Older copies go; this one, now the newest, stays. */
        for (int k = first - 1; k >= 0; k--) {
            const char *older = line_at(k);
            if (older && !strcmp(older, head)) delete_entry(k, 0);
        }
    }
    /* The Enter that ended the line (and a here-doc's) is not text. */
    while (text->len && text->p[text->len - 1] == '\n') text->len--;
    size_t typed_len = H.typed.len;
    while (typed_len && H.typed.p[typed_len - 1] == '\n') typed_len--;
    /* Only for more than one line (typed, or pasted as one). */
    if (typed_len && memchr(H.typed.p, '\n', typed_len) && same_words(text->p, text->len, H.typed.p, typed_len)) {
        text->len = 0;
        buf_add(text, H.typed.p, typed_len);
    }
    typed_reset();
    H.reading = 0;
    if (text->len > MAX_TEXT) text->len = MAX_TEXT;
    buf_free(&rules);
    H.next = *H.base + *H.length;
}

int bash_history_available(void)
{
    return bash_history_ready();
}

int bash_line_start(const char *control, const char *ignore, const char *size)
{
    if (!bash_history_ready()) {
        errno = ENOENT;
        return -1;
    }
    if (H.started) {
        struct buf leftover = {0};
        line_text(&leftover);
        buf_free(&leftover);
    }
    H.started = 1;
    /* Again when the line editor first waits: a shared-history prompt hook
     * after this one (`history -a; history -n`) may still change the list. */
    H.next = *H.base + *H.length;
    H.mark_pending = 1;
    H.keep_line = *H.enable_list == 0;
    const char *const values[3] = { control, ignore, size };
    take_rules(values);
    return 0;
}

void bash_keep_line(int on)
{
    if (H.keep_line && shim_in_shell_itself()) *H.remember = on;
}

void bash_mark_line_start(void)
{
    if (H.mark_pending && shim_in_shell_itself()) {
        H.mark_pending = 0;
        H.next = *H.base + *H.length;
        typed_reset();
        H.reading = 1;
    }
}

void bash_command_text(struct buf *text)
{
    bash_keep_line(0);
    line_text(text);
    H.keep_line = 0;
}
