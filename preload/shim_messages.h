/*
 * The messages the shim writes, as pure functions into a buffer: Begin and
 * End to the collector or to `prov __prepare`, and an orphaned End to
 * `prov __prepare`. Their Rust definitions are in crates/prov-protocol
 * (control.rs, shell_preparer.rs); its `shim` test builds this header and
 * reads every message it writes with those types, so a renamed field fails
 * there, not in a shell.
 */
#ifndef PROV_SHIM_MESSAGES_H
#define PROV_SHIM_MESSAGES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_util.h"

/* prov-protocol's VERSION, passed to `prov __prepare`, which refuses a shim
 * of another version with one line instead of misreading it. A test builds
 * the shim with another (-DPROV_PROTOCOL_VERSION) to be such a shim. */
#ifndef PROV_PROTOCOL_VERSION
#define PROV_PROTOCOL_VERSION "1"
#endif

/* The shim's requests to `prov __prepare` (shell_preparer.rs): prepare the
 * next observation, or take this one back for another record. */
#define PREPARE_REQUEST "P"
#define AGAIN_REQUEST "A"

/* `{"Begin":{…}}`: the command's start. `text` is NULL when the text travels
 * in a memfd of `text_len` bytes (text_in_fd); `held`: the shell hands the
 * observation back for another record and sends End only once it is idle
 * (reuse, end_when_idle); `append_env` (or NULL) adds the command's
 * variables (`,"env":"…"`, shim_env.c). 0 on success. */
static __attribute__((unused)) int msg_begin(struct buf *msg, uint64_t seq, const unsigned char *text,
                                             size_t text_len, const char *cwd, uint64_t start_ns, int held,
                                             int (*append_env)(struct buf *))
{
    return buf_str(msg, "{\"Begin\":{\"seq\":") || buf_u64(msg, seq) || buf_str(msg, ",\"text\":\"")
        || (text && buf_hex(msg, text, text_len))
        || buf_str(msg, "\",\"cwd\":\"") || buf_hex(msg, (const unsigned char *)cwd, strlen(cwd))
        || buf_str(msg, "\",\"start_ns\":") || buf_u64(msg, start_ns)
        || (held && buf_str(msg, ",\"reuse\":true,\"end_when_idle\":true"))
        || (append_env && append_env(msg))
        || (!text && (buf_str(msg, ",\"text_in_fd\":") || buf_u64(msg, text_len)))
        || buf_str(msg, "}}");
}

/* `{"End":{…}}`: the command's end and status; with `why` (not NULL), to
 * `prov __prepare` for a command run without an observation: why there
 * was none. 0 on success. */
static __attribute__((unused)) int msg_end(struct buf *msg, uint64_t end_ns, const char *status, const char *why)
{
    return buf_str(msg, "{\"End\":{\"end_ns\":") || buf_u64(msg, end_ns)
        || buf_str(msg, ",\"exit_status\":") || buf_u64(msg, (uint64_t)atoi(status))
        || (why && (buf_str(msg, ",\"why\":\"") || buf_hex(msg, (const unsigned char *)why, strlen(why))
                    || buf_str(msg, "\"")))
        || buf_str(msg, "}}");
}

/* `{"Orphan":{…}}` from an End (`{"End":{…}}`, `len` bytes) its collector did
 * not store, into out: the same fields under another name. Its length, or
 * -1 when `end` is no End or out is too small. */
static __attribute__((unused)) int msg_orphan(char *out, size_t out_len, const char *end, int len)
{
    static const char head[] = "{\"End\":";
    int head_len = (int)sizeof head - 1;
    if (len <= head_len || memcmp(end, head, (size_t)head_len)) return -1;
    int n = snprintf(out, out_len, "{\"Orphan\":%.*s", len - head_len, end + head_len);
    return n > 0 && (size_t)n < out_len ? n : -1;
}

#endif
