/*
 * Pure helpers both files of the shim use (prov_preload.c, bash_history.c):
 * the mmap-backed buffer, number formatting, fopen's mode as open flags and
 * the word comparison of bash's multi-line entries. No state, no hooks: so
 * that preload/tests/unit.c can test them without loading the shim.
 * Static and marked unused: each file compiles in the ones it uses, without
 * -Wunused-function complaining about the others (not `inline`: GCC then
 * inlines buf_reserve into read_capture and -Wnonnull sees a path that
 * cannot happen).
 */
#ifndef PROV_SHIM_UTIL_H
#define PROV_SHIM_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

/* Texts longer than this are cut (the collector keeps at most 64 MiB). */
#define MAX_TEXT (64u << 20)
/* Longer texts travel in a memfd attached to Begin: one control datagram
 * holds a few hundred KiB, and the JSON doubles a text as hex. */
#define INLINE_TEXT_MAX 16384

static __attribute__((unused)) void u64_to_str(uint64_t v, char *out)
{
    char tmp[24];
    int i = 0;
    do { tmp[i++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (i) *out++ = tmp[--i];
    *out = 0;
}

/* Appends to a growing buffer made with mmap (no malloc: also used where
 * the shell might be between fork and exec). */
struct buf { char *p; size_t len, cap; };

/* Mappings of freed small buffers, kept for the next ones: each command
 * makes and frees several (its text, the settings read back, Begin, End),
 * and an mmap, its first page fault and the munmap cost about a tenth of
 * the shim's time per prompt (benches/README.md). One cache for the whole
 * shim: bash's command text is made in bash_history.c and freed in
 * prov_preload.c, and with a cache per file it went to the other file's,
 * full, cache, so every bash prompt still paid an mmap and a munmap. Weak,
 * so each file including this header may define it and the linker keeps
 * one (hidden, as the whole shim is built). A forked child has its own. */
#define BUF_CACHE_SLOTS 4
#define BUF_CACHE_MAX_CAP (64u << 10)
struct buf_cache_slot {
    char *p;
    size_t cap;
};
__attribute__((weak)) struct buf_cache_slot buf_cache[BUF_CACHE_SLOTS];

static char *buf_cached(size_t cap)
{
    for (int i = 0; i < BUF_CACHE_SLOTS; i++) {
        if (buf_cache[i].p && buf_cache[i].cap == cap) {
            char *p = buf_cache[i].p;
            buf_cache[i].p = NULL;
            return p;
        }
    }
    return NULL;
}

static void buf_unmap(char *p, size_t cap)
{
    if (cap <= BUF_CACHE_MAX_CAP) {
        for (int i = 0; i < BUF_CACHE_SLOTS; i++) {
            if (!buf_cache[i].p) {
                buf_cache[i].p = p;
                buf_cache[i].cap = cap;
                return;
            }
        }
    }
    munmap(p, cap);
}

static __attribute__((unused)) int buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *p = buf_cached(cap);
    if (!p) p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    if (b->p) { memcpy(p, b->p, b->len); buf_unmap(b->p, b->cap); }
    b->p = p;
    b->cap = cap;
    return 0;
}

static __attribute__((unused)) int buf_add(struct buf *b, const void *data, size_t n)
{
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

static __attribute__((unused)) int buf_str(struct buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

static __attribute__((unused)) int buf_hex(struct buf *b, const unsigned char *data, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    if (buf_reserve(b, n * 2)) return -1;
    for (size_t i = 0; i < n; i++) {
        b->p[b->len++] = digits[data[i] >> 4];
        b->p[b->len++] = digits[data[i] & 15];
    }
    return 0;
}

static __attribute__((unused)) int buf_u64(struct buf *b, uint64_t v)
{
    char s[24];
    u64_to_str(v, s);
    return buf_str(b, s);
}

static __attribute__((unused)) void buf_free(struct buf *b)
{
    if (b->p) buf_unmap(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* fopen's mode string as open(2) flags; -1 for a mode fopen rejects. */
static __attribute__((unused)) int fopen_flags(const char *mode)
{
    int flags;
    switch (mode[0]) {
    case 'r': flags = O_RDONLY; break;
    case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
    default: return -1;
    }
    for (const char *m = mode + 1; *m && *m != ','; m++) {
        if (*m == '+') flags = (flags & ~O_ACCMODE) | O_RDWR;
        else if (*m == 'e') flags |= O_CLOEXEC;
        else if (*m == 'x') flags |= O_EXCL;
    }
    return flags;
}

/* The same words: equal but for blanks, newlines and semicolons. */
static __attribute__((unused)) int same_words(const char *a, size_t a_len, const char *b, size_t b_len)
{
    size_t i = 0, k = 0;
    for (;;) {
        while (i < a_len && strchr(" \t\n;", a[i])) i++;
        while (k < b_len && strchr(" \t\n;", b[k])) k++;
        if (i == a_len || k == b_len) return i == a_len && k == b_len;
        if (a[i++] != b[k++]) return 0;
    }
}

#endif
