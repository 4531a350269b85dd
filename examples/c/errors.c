/*
 * errors.c: the C-level tests of zarrstream's error paths (run by capi/tests/c_api.rs),
 * and an example of handling each return code.
 *
 *     errors basic DIR            every path that needs nothing special; DIR is empty
 *     errors disk-full DIR        DIR is a small filesystem of its own (a tmpfs)
 *     errors internal-create DIR  with ZARRSTREAM_CAPI_INJECT_PANIC=zs_writer_create
 *     errors internal-writer DIR  with ZARRSTREAM_CAPI_INJECT_PANIC=writer
 *
 * (The panic injection exists in debug builds of the library only.) Each check prints
 * nothing when it holds; the first that fails prints where and why and exits 1. At the
 * end: "errors: MODE: N checks passed".
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <pthread.h> /* on Windows: mingw-w64's winpthreads, linked statically */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#ifdef _WIN32 /* no nftw, mkdir without a mode, no nanosleep in the C runtime */
#define WIN32_LEAN_AND_MEAN
#include <direct.h>
#include <windows.h>
#else
#include <ftw.h>
#include <unistd.h>
#endif

#include "zarrstream.h"

static int checks;

static void fail_at(int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "errors.c:%d: check failed: %s\n  ", line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  zs_last_error(): \"%s\"\n", zs_last_error());
    exit(1);
}

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond))                                                                       \
            fail_at(__LINE__, #cond, __VA_ARGS__);                                         \
    } while (0)

/* `rc` is `want` and this thread's last error contains `part`. */
#define EXPECT(rc, want, part)                                                             \
    do {                                                                                   \
        int rc_ = (rc);                                                                    \
        CHECK(rc_ == (want), "%s returned %d, expected %s (%d)", #rc, rc_, #want, (want)); \
        CHECK(strstr(zs_last_error(), (part)) != NULL, "the message lacks \"%s\"", part); \
    } while (0)

enum { H = 64, W = 64 };
static uint16_t frame[H * W];
static const size_t FRAME_BYTES = sizeof frame;
static char dir[4096];

/* DIR/name in a static buffer (one of 4, so a few can be alive at once). */
static const char *path(const char *name)
{
    static char bufs[4][4200];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", dir, name);
    return p;
}

/* A config of 64 x 64 uint16 frames, 32 x 32 chunks, 4-frame shards, one thread, with
 * `extra` keys (or none) appended. */
static const char *config(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32],"
             " \"shard_shape\": [4, 64, 64], \"threads\": 1%s%s}",
             extra[0] ? ", " : "", extra);
    return buf;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static char *read_file(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (f == NULL)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

#ifdef _WIN32
/* Best effort, like nftw below: what cannot be removed (a file another handle holds
 * without delete sharing) stays. A directory link is removed, never followed. */
static void remove_tree(const char *p)
{
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s\\*", p);
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pattern, &fd);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
                continue;
            char child[4200];
            snprintf(child, sizeof child, "%s\\%s", p, fd.cFileName);
            DWORD a = fd.dwFileAttributes;
            if ((a & FILE_ATTRIBUTE_DIRECTORY) && !(a & FILE_ATTRIBUTE_REPARSE_POINT))
                remove_tree(child);
            else if (a & FILE_ATTRIBUTE_DIRECTORY)
                RemoveDirectoryA(child);
            else
                DeleteFileA(child);
        } while (FindNextFileA(h, &fd));
        FindClose(h);
    }
    RemoveDirectoryA(p);
}

static int make_dir(const char *p)
{
    return _mkdir(p); /* the new directory inherits its parent's ACL */
}

static void sleep_1ms(void)
{
    Sleep(1);
}
#else
static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void remove_tree(const char *p)
{
    nftw(p, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int make_dir(const char *p)
{
    return mkdir(p, 0755);
}

static void sleep_1ms(void)
{
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}
#endif

/* The number after "key": in a stats JSON object, or -1. */
static long stat_of(const char *json, const char *key)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    return p == NULL ? -1 : strtol(p + strlen(pattern), NULL, 10);
}

static zs_writer *create_ok(const char *store, const char *cfg)
{
    zs_writer *w = NULL;
    int rc = zs_writer_create(store, cfg, &w);
    CHECK(rc == ZS_OK && w != NULL, "create %s: %d", store, rc);
    return w;
}

static void push_ok(zs_writer *w, int n)
{
    for (int i = 0; i < n; i++) {
        frame[0] = (uint16_t)i;
        int rc = zs_writer_push(w, frame, FRAME_BYTES);
        CHECK(rc == ZS_OK, "push %d: %d", i, rc);
    }
}

static void finish_ok(zs_writer *w, long frames)
{
    char *stats = NULL;
    int rc = zs_writer_finish(w, &stats);
    CHECK(rc == ZS_OK && stats != NULL, "finish: %d", rc);
    CHECK(stat_of(stats, "frames_written") == frames, "frames_written in %s", stats);
    zs_string_free(stats);
}

/* ------------------------------------------------------------------------------------ */

static void null_arguments(void)
{
    const char *store = path("null.zarr");
    zs_writer *w = (zs_writer *)&checks; /* not NULL: create must clear it */
    EXPECT(zs_writer_create(NULL, config(""), &w), ZS_E_INVALID_ARGUMENT, "store_path is NULL");
    CHECK(w == NULL, "*out is NULL after a failure");
    EXPECT(zs_writer_create(store, NULL, &w), ZS_E_INVALID_ARGUMENT, "config_json is NULL");
    EXPECT(zs_writer_create(store, config(""), NULL), ZS_E_INVALID_ARGUMENT, "out is NULL");
    EXPECT(zs_writer_create("", config(""), &w), ZS_E_INVALID_ARGUMENT, "store_path is empty");
    CHECK(!exists(store), "nothing was created");

    EXPECT(zs_writer_push(NULL, frame, FRAME_BYTES), ZS_E_INVALID_ARGUMENT, "w is NULL");
    char *stats = (char *)&checks;
    EXPECT(zs_writer_finish(NULL, &stats), ZS_E_INVALID_ARGUMENT, "w is NULL");
    CHECK(stats == NULL, "*stats_json is NULL after a failure");
    EXPECT(zs_writer_finish(NULL, NULL), ZS_E_INVALID_ARGUMENT, "w is NULL");
    zs_writer_abort(NULL); /* no-ops */
    zs_string_free(NULL);

    w = create_ok(store, config(""));
    EXPECT(zs_writer_push(w, NULL, FRAME_BYTES), ZS_E_INVALID_ARGUMENT, "frame is NULL");
    push_ok(w, 1); /* still usable */
    finish_ok(w, 1);
}

static void invalid_configs(void)
{
    static const struct {
        const char *json, *message;
    } cases[] = {
        {"{\"shape\": [0, 64, 64], ", "config_json: EOF while parsing a value at line 1 column 23"},
        {"{\"shape\": [0 64]}", "config_json: expected `,` or `]` at line 1 column 14"},
        {"[[0, 64, 64], [1, 32, 32], [4, 64, 64]]", "not a JSON object"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"shapes\": [1]}",
         "unknown field `shapes`"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 48]}",
         "invalid array specification: inner chunk 32 does not divide shard 48 on axis 2"},
        {"{\"shape\": [0, 0, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64]}",
         "only axis 0 (the append axis) may be 0"},
        {"{\"shape\": [64], \"chunk_shape\": [32], \"shard_shape\": [64]}",
         "rank 1 is too small"},
        {"{\"shape\": [0, 64], \"chunk_shape\": [1, 32], \"shard_shape\": [4, 64]}",
         "axis 0 has size 0"},
        {"{\"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64]}", "shape was not set"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"threads\": \"two\"}",
         "invalid type: string \"two\", expected usize"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"codec\": \"gzip\"}",
         "codec: \"gzip\" is not a codec"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"codec\": \"blosc-zstd:3:bits\"}",
         "codec: \"blosc-zstd:3:bits\" is not a codec"},
        /* a byte shuffle of 1-byte elements does nothing: asked for, it is refused */
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"dtype\": \"uint8\", \"codec\": \"blosc-zstd:3:shuffle\"}",
         "invalid array specification: blosc-zstd with shuffle does not fit uint8"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"codec\": \"blosc-zstd:10\"}",
         "invalid array specification: blosc level 10 is out of range 0..=9"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"chunk_order\": \"z\"}",
         "chunk_order: \"z\" is not a chunk order (c, morton)"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"chunk_order\": \"morton\", \"sink\": \"direct\"}",
         "writer options chunk_order morton and sink direct cannot be combined"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"threads\": 5000}",
         "writer option threads = 5000 is out of range (at most 1024)"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"ome\": {\"channels\": [\"GFP\"]}}",
         "invalid OME-Zarr options: OME option channels is given but the array has no c axis"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"ome\": {\"levels\": 99}}",
         "OME option levels = 99 must be 1 to 16"},
        {"{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32], \"shard_shape\": [4, 64, 64],"
         " \"dtype\": \"\xff\"}",
         "config_json is not UTF-8"},
    };
    const char *store = path("invalid.zarr");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zs_writer *w = (zs_writer *)&checks;
        EXPECT(zs_writer_create(store, cases[i].json, &w), ZS_E_INVALID_CONFIG, cases[i].message);
        CHECK(w == NULL, "case %zu: *out is NULL", i);
        CHECK(!exists(store), "case %zu: nothing was created", i);
        /* The memory estimate refuses the same configurations with the same code and
         * message as creating the writer. */
        char *estimate = (char *)&checks;
        EXPECT(zs_estimate_memory(cases[i].json, &estimate), ZS_E_INVALID_CONFIG,
               cases[i].message);
        CHECK(estimate == NULL, "case %zu: *estimate_json is NULL", i);
    }
}

/* The memory functions' NULL arguments, and an estimate and a live count that agree. */
static void memory(void)
{
    char *estimate = NULL;
    EXPECT(zs_estimate_memory(NULL, &estimate), ZS_E_INVALID_ARGUMENT, "config_json is NULL");
    EXPECT(zs_estimate_memory(config(""), NULL), ZS_E_INVALID_ARGUMENT,
           "estimate_json is NULL");
    EXPECT(zs_recording_estimate_memory("{\"arrays\": []}", &estimate), ZS_E_INVALID_CONFIG,
           "a non-empty list of array objects is required");
    EXPECT(zs_writer_memory_in_use(NULL, NULL, NULL), ZS_E_INVALID_ARGUMENT, "w is NULL");
    EXPECT(zs_recording_memory_in_use(NULL, NULL, NULL), ZS_E_INVALID_ARGUMENT, "r is NULL");

    int rc = zs_estimate_memory(config(""), &estimate);
    CHECK(rc == ZS_OK && estimate != NULL, "estimate: %d", rc);
    long resident = stat_of(estimate, "resident");
    CHECK(resident > 0 && stat_of(estimate, "total") >= resident, "estimate %s", estimate);
    zs_string_free(estimate);

    zs_writer *w = create_ok(path("memory.zarr"), config(""));
    uint64_t current = 0, peak = 0;
    CHECK(zs_writer_memory_in_use(w, &current, &peak) == ZS_OK, "memory in use");
    CHECK(current > 0 && current <= peak && peak <= (uint64_t)resident,
          "in use %llu, peak %llu, estimate %ld", (unsigned long long)current,
          (unsigned long long)peak, resident);
    CHECK(zs_writer_memory_in_use(w, NULL, &peak) == ZS_OK, "one pointer may be NULL");
    push_ok(w, 4);
    finish_ok(w, 4);
}

static void existing_and_locked(void)
{
    const char *store = path("exists.zarr");
    CHECK(make_dir(store) == 0, "mkdir %s: %s", store, strerror(errno));
    zs_writer *w = NULL;
    EXPECT(zs_writer_create(store, config(""), &w), ZS_E_EXISTS,
           "exists.zarr: already exists (set overwrite to replace it)");
    CHECK(exists(store), "the existing directory is left alone");

    /* overwrite replaces a finished store, but not one a live writer holds */
    w = create_ok(store, config("\"overwrite\": true"));
    zs_writer *other = NULL;
    EXPECT(zs_writer_create(store, config("\"overwrite\": true"), &other), ZS_E_LOCKED,
           "the store is locked by a writer that is still recording");
    CHECK(other == NULL, "*out is NULL");
    push_ok(w, 2);
    finish_ok(w, 2);
}

static void frame_size(void)
{
    zs_writer *w = create_ok(path("size.zarr"), config(""));
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES - 1), ZS_E_FRAME_SIZE,
           "frame 0: expected 8192 bytes, got 8191");
    EXPECT(zs_writer_push(w, frame, 0), ZS_E_FRAME_SIZE, "expected 8192 bytes, got 0");
    push_ok(w, 1);
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES * 2), ZS_E_FRAME_SIZE,
           "frame 1: expected 8192 bytes, got 16384");
    push_ok(w, 1); /* the writer stays usable */
    finish_ok(w, 2);
}

static void array_full(void)
{
    zs_writer *w = create_ok(path("bounded.zarr"),
                             "{\"shape\": [3, 64, 64], \"chunk_shape\": [1, 32, 32],"
                             " \"shard_shape\": [4, 64, 64], \"threads\": 1}");
    push_ok(w, 3);
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_ARRAY_FULL,
           "the array is full: it holds 3 frames");
    finish_ok(w, 3);
}

/* The store vanishes under a running writer (on Windows: its chunk directory becomes a
 * file): the next shard cannot be created (I/O error), after which the writer is closed. */
static void io_error_then_closed(void)
{
    const char *store = path("vanishing.zarr");
    zs_writer *w = create_ok(store, "{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32],"
                                    " \"shard_shape\": [1, 64, 64], \"threads\": 1}");
    push_ok(w, 1);
#ifdef _WIN32
    /* Windows deletes a file that is still open only when its last handle closes, so the
     * store of a live writer cannot vanish (its lock file stays, and the writer would go
     * on making directories in it). What stops it is a file where its chunk directory
     * was: the next shard's directory cannot be made. */
    const char *chunks = path("vanishing.zarr/c");
    FILE *blocker = NULL;
    for (int tries = 0; blocker == NULL && tries < 100; tries++) {
        remove_tree(chunks);
        blocker = fopen(chunks, "wb"); /* fails while the writer recreates the directory */
        if (blocker == NULL)
            sleep_1ms();
    }
    CHECK(blocker != NULL, "a file replaced %s", chunks);
    fclose(blocker);
#else
    /* The writer's threads may be creating files in it meanwhile. */
    for (int tries = 0; exists(store) && tries < 100; tries++) {
        remove_tree(store);
        sleep_1ms();
    }
    CHECK(!exists(store), "the store was removed");
#endif
    int rc = ZS_OK, pushed = 1;
    while (rc == ZS_OK && pushed < 100) {
        rc = zs_writer_push(w, frame, FRAME_BYTES);
        pushed++;
    }
    EXPECT(rc, ZS_E_IO, "vanishing.zarr");
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_CLOSED, "the writer is closed");
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_CLOSED, "the writer is closed");
    char *stats = (char *)&checks;
    EXPECT(zs_writer_finish(w, &stats), ZS_E_CLOSED, "the writer is closed");
    CHECK(stats == NULL, "no statistics after a failure");
}

static void abort_keeps_the_frames(void)
{
    const char *store = path("aborted.zarr");
    zs_writer *w = create_ok(store, config(""));
    push_ok(w, 6);
    zs_writer_abort(w);
    const char *meta = read_file(path("aborted.zarr/zarr.json"));
    CHECK(meta != NULL, "zarr.json exists");
    CHECK(strstr(meta, "\"aborted\"") != NULL, "state aborted in %s", meta);
    CHECK(strstr(meta, "aborted by the caller") != NULL, "the reason in %s", meta);
    CHECK(strstr(meta, "\"frames_committed\": 6") != NULL, "6 frames committed in %s", meta);
    CHECK(exists(path("aborted.zarr/c/1/0/0")), "the partial shard (frames 4, 5) was kept");
}

static void stats_are_optional(void)
{
    zs_writer *w = create_ok(path("nostats.zarr"), config(""));
    push_ok(w, 1);
    CHECK(zs_writer_finish(w, NULL) == ZS_OK, "finish without statistics");
}

static void drop_counts(void)
{
    zs_writer *w = create_ok(path("drop.zarr"), config("\"backpressure\": \"drop\","
                                                       " \"pool_frames\": 1, \"codec\": \"zstd:9\""));
    long dropped = 0;
    for (int i = 0; i < 200; i++) {
        int rc = zs_writer_push(w, frame, FRAME_BYTES);
        CHECK(rc == ZS_OK || rc == ZS_DROPPED, "push %d: %d", i, rc);
        dropped += rc == ZS_DROPPED;
    }
    /* A frame the camera missed: counted as pushed and dropped, as a recording's. */
    CHECK(zs_writer_skip(w) == ZS_OK, "skip");
    dropped++;
    uint64_t pushed = 0;
    CHECK(zs_writer_frames_pushed(w, &pushed) == ZS_OK && pushed == 201, "%llu pushed",
          (unsigned long long)pushed);
    EXPECT(zs_writer_frames_pushed(w, NULL), ZS_E_INVALID_ARGUMENT, "frames is NULL");
    EXPECT(zs_writer_skip(NULL), ZS_E_INVALID_ARGUMENT, "w is NULL");
    char *stats = NULL;
    CHECK(zs_writer_finish(w, &stats) == ZS_OK, "finish");
    CHECK(stat_of(stats, "frames_pushed") == 201, "%s", stats);
    CHECK(stat_of(stats, "frames_dropped") == dropped, "%ld dropped: %s", dropped, stats);
    CHECK(stat_of(stats, "frames_written") == 201 - dropped, "%s", stats);
    zs_string_free(stats);
}

static void ome_image(void)
{
    zs_writer *w = create_ok(path("image.ome.zarr"),
                             config("\"ome\": {\"pixel_size\": [0.5, 0.5],"
                                    " \"frame_interval_ms\": 10, \"levels\": 2}"));
    push_ok(w, 2);
    finish_ok(w, 2);
    const char *group = read_file(path("image.ome.zarr/zarr.json"));
    CHECK(group != NULL && strstr(group, "\"multiscales\"") != NULL, "the group: %s", group);
    CHECK(exists(path("image.ome.zarr/0/zarr.json")), "level 0");
    CHECK(exists(path("image.ome.zarr/1/zarr.json")), "level 1");
}

static void *fresh_thread(void *arg)
{
    (void)arg;
    /* A thread that has not failed sees "", whatever other threads did. */
    int empty = strcmp(zs_last_error(), "") == 0;
    int rc = zs_writer_create(NULL, NULL, NULL);
    int own = strcmp(zs_last_error(), "out is NULL") == 0;
    return (void *)(intptr_t)(empty && rc == ZS_E_INVALID_ARGUMENT && own);
}

static void last_error_is_per_thread(void)
{
    EXPECT(zs_writer_push(NULL, frame, FRAME_BYTES), ZS_E_INVALID_ARGUMENT, "w is NULL");
    const char *before = zs_last_error();
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, fresh_thread, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, &ok) == 0 && ok != NULL, "the other thread saw its own message");
    CHECK(strcmp(zs_last_error(), "w is NULL") == 0, "this thread's message is unchanged");
    CHECK(zs_last_error() == before, "and its pointer still valid");
    /* successes leave it */
    zs_writer *w = create_ok(path("kept.zarr"), config(""));
    finish_ok(w, 0);
    CHECK(strcmp(zs_last_error(), "w is NULL") == 0, "a success keeps the last error");
}

/* Says why a writer of writers_in_parallel failed: zs_last_error is per thread, so the
 * main thread's CHECK cannot. */
static void *thread_failed(const char *store)
{
    fprintf(stderr, "errors.c: %s: %s\n", store, zs_last_error());
    return NULL;
}

static void *record_in_thread(void *name)
{
    /* Not path(): its buffers are shared, and the two threads would race for them. */
    char store[4200];
    snprintf(store, sizeof store, "%s/%s", dir, (const char *)name);
    zs_writer *w = NULL;
    /* Nor config(), for the same reason. */
    const char *cfg = "{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32],"
                      " \"shard_shape\": [4, 64, 64], \"threads\": 1}";
    if (zs_writer_create(store, cfg, &w) != ZS_OK)
        return thread_failed(store);
    uint16_t own[H * W] = {0};
    for (int i = 0; i < 20; i++)
        if (zs_writer_push(w, own, sizeof own) != ZS_OK) {
            void *failed = thread_failed(store);
            zs_writer_abort(w);
            return failed;
        }
    return zs_writer_finish(w, NULL) == ZS_OK ? name : thread_failed(store);
}

static void writers_in_parallel(void)
{
    static char a[] = "parallel-a.zarr", b[] = "parallel-b.zarr";
    pthread_t ta, tb;
    void *ra = NULL, *rb = NULL;
    CHECK(pthread_create(&ta, NULL, record_in_thread, a) == 0, "pthread_create");
    CHECK(pthread_create(&tb, NULL, record_in_thread, b) == 0, "pthread_create");
    CHECK(pthread_join(ta, &ra) == 0 && ra == a, "writer a");
    CHECK(pthread_join(tb, &rb) == 0 && rb == b, "writer b");
}

/* Attributes set while recording: published at once, kept by later publications; the
 * writer's own namespaces and bad JSON refused. */
static void attributes(void)
{
    const char *store = path("attrs.zarr");
    zs_writer *w = create_ok(store, config(""));
    push_ok(w, 3);
    EXPECT(zs_writer_set_attribute(w, 0, "stage", "{\"x_um\": 12.5}"), ZS_OK, "");
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/zarr.json", store);
    const char *doc = read_file(meta);
    CHECK(doc != NULL && strstr(doc, "\"x_um\": 12.5") != NULL, "stage published at once");
    EXPECT(zs_writer_set_attribute(w, 0, "zarrstream", "{}"), ZS_E_INVALID_ARGUMENT,
           "keeps this namespace");
    EXPECT(zs_writer_set_attribute(w, 0, "stage", "{not json"), ZS_E_INVALID_ARGUMENT,
           "not JSON");
    EXPECT(zs_writer_set_attribute(w, 1, "acquisition", "1"), ZS_E_INVALID_ARGUMENT,
           "OME-Zarr image");
    EXPECT(zs_writer_set_attribute(w, 0, NULL, "1"), ZS_E_INVALID_ARGUMENT, "name is NULL");
    EXPECT(zs_writer_set_attribute(w, 0, "gone", "true"), ZS_OK, "");
    EXPECT(zs_writer_set_attribute(w, 0, "gone", NULL), ZS_OK, "");
    push_ok(w, 2);
    finish_ok(w, 5);
    doc = read_file(meta);
    CHECK(doc != NULL && strstr(doc, "\"x_um\": 12.5") != NULL, "stage kept after finish");
    CHECK(doc != NULL && strstr(doc, "\"gone\"") == NULL, "removed attribute stays removed");
    CHECK(doc != NULL && strstr(doc, "\"finished\"") != NULL, "finished");
}

/* Per-frame metadata: stored with the frame, or the frame refused with it. */
static void frame_meta(void)
{
    const char *store = path("meta.zarr");
    zs_writer *w = create_ok(
        store, config("\"frame_meta\": {\"fields\": {\"timestamp\": \"float64\","
                      " \"counter\": \"int64\"}, \"json\": true}"));
    EXPECT(zs_writer_push_with(w, frame, FRAME_BYTES,
                               "{\"values\": {\"timestamp\": 0.5, \"counter\": 7},"
                               " \"json\": {\"laser\": 488}}"),
           ZS_OK, "");
    EXPECT(zs_writer_push_with(w, frame, FRAME_BYTES, "{\"values\": {\"exposure\": 1}}"),
           ZS_E_INVALID_ARGUMENT, "exposure");
    EXPECT(zs_writer_push_with(w, frame, FRAME_BYTES, "{\"values\": {\"counter\": 1.5}}"),
           ZS_E_INVALID_ARGUMENT, "counter");
    EXPECT(zs_writer_push_with(w, frame, FRAME_BYTES, "not json"), ZS_E_INVALID_ARGUMENT,
           "not JSON");
    EXPECT(zs_writer_push_with(w, frame, FRAME_BYTES, NULL), ZS_E_INVALID_ARGUMENT,
           "meta_json is NULL");
    push_ok(w, 1); /* without metadata: its values read as the fill value */
    finish_ok(w, 2);
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/frame_meta/timestamp/zarr.json", store);
    const char *doc = read_file(meta);
    CHECK(doc != NULL && strstr(doc, "\"float64\"") != NULL, "timestamp is a float64 array");
    CHECK(doc != NULL && strstr(doc, "\"shape\": [\n    2\n  ]") != NULL,
          "two frames of metadata: %s", doc ? doc : "(none)");
}

/* The wider types: a float64 array takes frames of 8-byte elements only, an int64 fill
 * value a double cannot hold is refused, and every type name is accepted. */
static void data_types(void)
{
    static double wide[H * W];
    for (size_t i = 0; i < H * W; i++)
        wide[i] = (double)i * 0.5 - 100.0;
    const char *store = path("float64.zarr");
    zs_writer *w = create_ok(store, config("\"dtype\": \"float64\", \"fill_value\": \"NaN\""));
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_FRAME_SIZE, "expected 32768 bytes");
    CHECK(zs_writer_push(w, wide, sizeof wide) == ZS_OK, "a float64 frame: %s", zs_last_error());
    finish_ok(w, 1);
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/zarr.json", store);
    const char *doc = read_file(meta);
    CHECK(doc != NULL && strstr(doc, "\"data_type\": \"float64\"") != NULL, "float64: %s",
          doc ? doc : "(none)");
    zs_writer *bad = (zs_writer *)&checks;
    EXPECT(zs_writer_create(path("int64.zarr"),
                            config("\"dtype\": \"int64\", \"fill_value\": 9223372036854775808"),
                            &bad),
           ZS_E_INVALID_CONFIG, "not representable as int64");
    CHECK(bad == NULL, "*out is NULL");
    const char *names[] = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                           "uint64", "float32", "float64", "i8", "u64", "f64"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char extra[64], name[64];
        snprintf(extra, sizeof extra, "\"dtype\": \"%s\"", names[i]);
        snprintf(name, sizeof name, "types-%zu.zarr", i);
        zs_writer *t = create_ok(path(name), config(extra));
        zs_writer_abort(t);
    }
}

static void basic(void)
{
    printf("version %s\n", zs_version());
    CHECK(zs_last_error() != NULL && strcmp(zs_last_error(), "") == 0,
          "no error yet: \"\"");
    null_arguments();
    invalid_configs();
    memory();
    existing_and_locked();
    frame_size();
    array_full();
    io_error_then_closed();
    abort_keeps_the_frames();
    stats_are_optional();
    drop_counts();
    ome_image();
    attributes();
    frame_meta();
    data_types();
    last_error_is_per_thread();
    writers_in_parallel();
}

/* DIR is a small tmpfs: push until the disk is full. */
static void disk_full(void)
{
    const char *store = path("full.zarr");
    zs_writer *w = create_ok(store, "{\"shape\": [0, 64, 64], \"chunk_shape\": [1, 32, 32],"
                                    " \"shard_shape\": [4, 64, 64], \"codec\": \"none\","
                                    " \"threads\": 1}");
    int rc = ZS_OK;
    long accepted = 0;
    while (accepted < 100000) {
        rc = zs_writer_push(w, frame, FRAME_BYTES);
        if (rc != ZS_OK)
            break;
        accepted++;
    }
    printf("disk full after %ld frames: %s\n", accepted, zs_last_error());
    CHECK(accepted > 0, "some frames fit");
    EXPECT(rc, ZS_E_DISK_FULL, "disk full");
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_CLOSED, "the writer is closed");
    char *stats = (char *)&checks;
    EXPECT(zs_writer_finish(w, &stats), ZS_E_CLOSED, "the writer is closed");
    CHECK(stats == NULL, "no statistics");
    const char *meta = read_file(path("full.zarr/zarr.json"));
    CHECK(meta != NULL && strstr(meta, "\"aborted\"") != NULL, "aborted: %s", meta);
    char want[64];
    snprintf(want, sizeof want, "\"frames_committed\": %ld", accepted);
    CHECK(strstr(meta, want) != NULL, "every accepted frame is published: %s", meta);
}

static void internal_create(void)
{
    zs_writer *w = (zs_writer *)&checks;
    EXPECT(zs_writer_create(path("panic.zarr"), config(""), &w), ZS_E_INTERNAL,
           "internal error: zs_writer_create panicked");
    CHECK(w == NULL, "*out is NULL");
    CHECK(!exists(path("panic.zarr")), "nothing was created");
}

static void internal_writer(void)
{
    zs_writer *w = create_ok(path("poisoned.zarr"), config(""));
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_INTERNAL,
           "internal error: zs_writer_push panicked");
    EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_CLOSED,
           "an earlier call on it failed with an internal error");
    uint64_t pushed = 0;
    EXPECT(zs_writer_frames_pushed(w, &pushed), ZS_E_CLOSED, "internal error");
    EXPECT(zs_writer_skip(w), ZS_E_CLOSED, "internal error");
    char *stats = (char *)&checks;
    EXPECT(zs_writer_finish(w, &stats), ZS_E_CLOSED, "internal error");
    CHECK(stats == NULL, "no statistics");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s basic|disk-full|internal-create|internal-writer DIR\n",
                argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[2]);
    const char *mode = argv[1];
    if (strcmp(mode, "basic") == 0)
        basic();
    else if (strcmp(mode, "disk-full") == 0)
        disk_full();
    else if (strcmp(mode, "internal-create") == 0)
        internal_create();
    else if (strcmp(mode, "internal-writer") == 0)
        internal_writer();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("errors: %s: %d checks passed\n", mode, checks);
    return 0;
}
