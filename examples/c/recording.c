/*
 * recording.c: several arrays in one Zarr group with zs_recording, pushed from two
 * threads, and resuming a finished array (run by capi/tests/c_api.rs, which reads the
 * stores back with zarr-python: capi/tests/check_recording.py).
 *
 *     recording DIR                     the recording and its error paths
 *     recording internal-create DIR     with ZARRSTREAM_CAPI_INJECT_PANIC=zs_recording_create
 *     recording internal-recording DIR  with ZARRSTREAM_CAPI_INJECT_PANIC=recording
 *
 * (The panic injection exists in debug builds of the library only: a panic comes back
 * as ZS_E_INTERNAL, and a recording whose call panicked answers ZS_E_CLOSED on every
 * thread.) DIR is an empty directory. Writes:
 *   DIR/rec.zarr   a recording: "cam0" (uint16, 48 x 64, lz4, per-frame metadata, pushed
 *                  by the main thread), "stage/cam1" (uint8, 32 x 40, zstd, pushed by a
 *                  second thread at the same time) and "img" (an OME-Zarr image, uint16,
 *                  16 x 16), the chunks of each shard in Morton order ("chunk_order");
 *                  root, array and image group attributes; then stage/cam1 and img are
 *                  resumed (in C order) and continued with more frames (all three,
 *                  cam0's per-frame metadata included, resume; cam0 gets no more).
 *   DIR/w.zarr     a zs_writer recording resumed once ("resume": true).
 * and checks the error paths of the recording API on the way (unknown array, duplicate
 * keys, wrong frame size, resume with another codec, ...). Every frame is computed
 * from its index (pixel0, pixel1, pixel_img, pixel_w), so a reader can check them.
 *
 * Prints "estimate: {...}" (zs_recording_estimate_memory), "memory: CURRENT PEAK"
 * (zs_recording_memory_in_use after the first pushes), "stats: {...}" (the first
 * finish's statistics), "counts: N0 N1 NI NW" (frames
 * in cam0, stage/cam1, img and w.zarr at the end) and "recording: N checks passed".
 * The first check that fails prints where and why and exits 1.
 */
#define _XOPEN_SOURCE 700
#include <pthread.h> /* on Windows: mingw-w64's winpthreads, linked statically */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _WIN32 /* the C runtime's mkdir is _mkdir, without a mode */
#include <direct.h>
#endif

#include "zarrstream.h"

static int checks;

static void fail_at(int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "recording.c:%d: check failed: %s\n  ", line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  zs_last_error(): \"%s\"\n", zs_last_error());
    exit(1);
}

/* Counted with an atomic add: the second thread checks too. */
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);                                  \
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

#define OK(rc)                                                                             \
    do {                                                                                   \
        int rc_ = (rc);                                                                    \
        CHECK(rc_ == ZS_OK, "%s returned %d, expected ZS_OK", #rc, rc_);                   \
    } while (0)

/* Frames: the first run pushes *_A (and cam0 N0), the resumed run *_B more. */
enum {
    H0 = 48, W0 = 64, N0 = 9,
    H1 = 32, W1 = 40, N1_A = 11, N1_B = 4,
    HI = 16, WI = 16, NI_A = 3, NI_B = 2,
    HW = 16, WW = 16, NW_A = 6, NW_B = 7,
};

static uint16_t pixel0(uint32_t t, uint32_t y, uint32_t x)
{
    return (uint16_t)(t * 1000u + y * 64u + x);
}

static uint8_t pixel1(uint32_t t, uint32_t y, uint32_t x)
{
    return (uint8_t)(t * 7u + y * 3u + x);
}

static uint16_t pixel_img(uint32_t t, uint32_t y, uint32_t x)
{
    return (uint16_t)(50000u + t * 256u + y * 16u + x);
}

static uint16_t pixel_w(uint32_t t, uint32_t y, uint32_t x)
{
    return (uint16_t)(t * 256u + y * 16u + x);
}

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

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int make_dir(const char *p)
{
#ifdef _WIN32
    return _mkdir(p); /* the new directory inherits its parent's ACL */
#else
    return mkdir(p, 0777);
#endif
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

/* The recording's config: `top` extra writer keys (or ""), cam1's codec, and
 * whether cam0 is in it. */
static const char *config(const char *top, const char *codec1, int with_cam0)
{
    static const char *cam0 =
        "{\"key\": \"cam0\", \"array\": {\"shape\": [0, 48, 64], \"chunk_shape\": [1, 48, 64],"
        " \"shard_shape\": [4, 48, 64], \"dtype\": \"uint16\", \"codec\": \"lz4:1\","
        " \"attributes\": {\"camera\": \"left\"}},"
        " \"frame_meta\": {\"fields\": {\"timestamp\": \"float64\", \"counter\": \"int64\"}}},";
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"writer\": {%s \"threads\": 2},"
             " \"attributes\": {\"experiment\": \"E12\"},"
             " \"arrays\": [%s"
             "  {\"key\": \"stage/cam1\", \"array\": {\"shape\": [0, 32, 40],"
             "   \"chunk_shape\": [1, 16, 20], \"shard_shape\": [4, 32, 40], \"dtype\": \"uint8\","
             "   \"codec\": \"%s\"}},"
             "  {\"key\": \"img\", \"array\": {\"shape\": [0, 16, 16], \"chunk_shape\": [1, 16, 16],"
             "   \"shard_shape\": [2, 16, 16], \"dtype\": \"uint16\"},"
             "   \"ome\": {\"omero\": \"auto\"}}]}",
             top, with_cam0 ? cam0 : "", codec1);
    return buf;
}

struct cam1_job {
    zs_recording *r;
    size_t index;
    uint32_t first, count;
    int rc;
};

/* The second camera's thread: pushes its frames into stage/cam1 while the main thread
 * pushes into cam0. */
static void *cam1_thread(void *arg)
{
    struct cam1_job *job = arg;
    static uint8_t frame[H1 * W1];
    job->rc = ZS_OK;
    for (uint32_t t = job->first; t < job->first + job->count; t++) {
        for (uint32_t y = 0; y < H1; y++)
            for (uint32_t x = 0; x < W1; x++)
                frame[y * W1 + x] = pixel1(t, y, x);
        int rc = zs_recording_push(job->r, job->index, frame, sizeof frame);
        if (rc != ZS_OK) {
            fprintf(stderr, "cam1 frame %u: %d %s\n", t, rc, zs_last_error());
            job->rc = rc;
            break;
        }
    }
    /* A failure on this thread is this thread's last error, not the main thread's. */
    EXPECT(zs_recording_push(job->r, 99, frame, sizeof frame), ZS_E_NO_ARRAY, "99");
    return NULL;
}

/* Pushes frames into every array: [first1, first1 + n1) into cam1 from a second
 * thread, [0, n0) into cam0 (with metadata; a recording without cam0 when n0 is 0) and
 * [first_img, first_img + n_img) into img from this one. */
static void push_all(zs_recording *r, uint32_t n0, uint32_t first1, uint32_t n1,
                     uint32_t first_img, uint32_t n_img)
{
    size_t i0 = 99, i1 = 99, iimg = 99;
    if (n0 > 0) {
        OK(zs_recording_array_index(r, "cam0", &i0));
        CHECK(i0 == 0, "cam0 is array 0, not %zu", i0);
    } else {
        EXPECT(zs_recording_array_index(r, "cam0", &i0), ZS_E_NO_ARRAY, "cam0");
    }
    OK(zs_recording_array_index(r, "stage/cam1", &i1));
    OK(zs_recording_array_index(r, "img", &iimg));
    CHECK(i1 == (n0 > 0 ? 1u : 0u) && iimg == i1 + 1, "indexes %zu %zu", i1, iimg);

    struct cam1_job job = {r, i1, first1, n1, -100};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, cam1_thread, &job) == 0, "pthread_create");

    static uint16_t frame0[H0 * W0];
    for (uint32_t t = 0; t < n0; t++) {
        for (uint32_t y = 0; y < H0; y++)
            for (uint32_t x = 0; x < W0; x++)
                frame0[y * W0 + x] = pixel0(t, y, x);
        char meta[128];
        snprintf(meta, sizeof meta, "{\"values\": {\"timestamp\": %.2f, \"counter\": %u}}",
                 t * 0.25, t);
        OK(zs_recording_push_with(r, i0, frame0, sizeof frame0, meta));
    }
    static uint16_t frame_img[HI * WI];
    for (uint32_t t = first_img; t < first_img + n_img; t++) {
        for (uint32_t y = 0; y < HI; y++)
            for (uint32_t x = 0; x < WI; x++)
                frame_img[y * WI + x] = pixel_img(t, y, x);
        OK(zs_recording_push(r, iimg, frame_img, sizeof frame_img));
    }
    CHECK(pthread_join(thread, NULL) == 0, "pthread_join");
    CHECK(job.rc == ZS_OK, "the cam1 thread's pushes returned %d", job.rc);

    uint64_t frames = 0;
    if (n0 > 0) {
        OK(zs_recording_frames_pushed(r, i0, &frames));
        CHECK(frames == n0, "cam0 frames_pushed %llu", (unsigned long long)frames);
    }
    OK(zs_recording_frames_pushed(r, i1, &frames));
    CHECK(frames == first1 + n1, "cam1 frames_pushed %llu", (unsigned long long)frames);
}

/* The bad inputs of a live recording; none of them changes what it holds. */
static void bad_input(zs_recording *r)
{
    size_t index = 1234;
    EXPECT(zs_recording_array_index(r, "cam9", &index), ZS_E_NO_ARRAY, "cam9");
    CHECK(index == 1234, "index left unchanged, got %zu", index);
    EXPECT(zs_recording_array_index(r, NULL, &index), ZS_E_INVALID_ARGUMENT, "key is NULL");
    EXPECT(zs_recording_array_index(r, "cam0", NULL), ZS_E_INVALID_ARGUMENT,
           "index is NULL");
    EXPECT(zs_recording_array_index(NULL, "cam0", &index), ZS_E_INVALID_ARGUMENT,
           "r is NULL");
    EXPECT(zs_recording_array_index(r, "\xff", &index), ZS_E_INVALID_ARGUMENT,
           "key is not UTF-8");

    uint8_t small[16] = {0};
    /* The wrong size is refused before the pointer is read: nbytes here is a lie. */
    EXPECT(zs_recording_push(r, 0, small, 48 * 64 * 2 - 2), ZS_E_FRAME_SIZE,
           "expected 6144 bytes, got 6142");
    EXPECT(zs_recording_push(r, 1, small, sizeof small), ZS_E_FRAME_SIZE,
           "expected 1280 bytes, got 16");
    EXPECT(zs_recording_push(r, 3, small, sizeof small), ZS_E_NO_ARRAY, "\"3\"");
    EXPECT(zs_recording_push(r, 0, NULL, 6144), ZS_E_INVALID_ARGUMENT, "frame is NULL");
    EXPECT(zs_recording_push(NULL, 0, small, 6144), ZS_E_INVALID_ARGUMENT, "r is NULL");
    static uint16_t frame0[H0 * W0];
    EXPECT(zs_recording_push_with(r, 0, frame0, sizeof frame0, "{\"values\": {\"nope\": 1}}"),
           ZS_E_INVALID_ARGUMENT, "nope");
    EXPECT(zs_recording_push_with(r, 0, frame0, sizeof frame0, "{"), ZS_E_INVALID_ARGUMENT,
           "meta_json is not JSON");
    /* stage/cam1 stores no metadata. */
    static uint8_t frame1[H1 * W1];
    EXPECT(zs_recording_push_with(r, 1, frame1, sizeof frame1,
                                  "{\"values\": {\"timestamp\": 1.0}}"),
           ZS_E_INVALID_ARGUMENT, "without frame_meta");

    EXPECT(zs_recording_set_attribute(r, "cam9", "a", "1"), ZS_E_NO_ARRAY, "cam9");
    EXPECT(zs_recording_set_attribute(r, NULL, "zarrstream", "1"), ZS_E_INVALID_ARGUMENT,
           "zarrstream");
    EXPECT(zs_recording_set_attribute(r, "cam0", "zarrstream", "1"), ZS_E_INVALID_ARGUMENT,
           "zarrstream");
    EXPECT(zs_recording_set_attribute(r, "", "a", "{not json"), ZS_E_INVALID_ARGUMENT,
           "value_json is not JSON");
    EXPECT(zs_recording_set_attribute(r, "", NULL, "1"), ZS_E_INVALID_ARGUMENT,
           "name is NULL");
    EXPECT(zs_recording_set_group_attribute(r, 0, "a", "1"), ZS_E_INVALID_ARGUMENT,
           "OME-Zarr image");
    EXPECT(zs_recording_set_group_attribute(r, 7, "a", "1"), ZS_E_NO_ARRAY, "7");
    EXPECT(zs_recording_set_group_attribute(r, 2, "ome", "1"), ZS_E_INVALID_ARGUMENT,
           "ome");
    uint64_t frames;
    EXPECT(zs_recording_frames_pushed(r, 5, &frames), ZS_E_NO_ARRAY, "5");
    EXPECT(zs_recording_frames_pushed(r, 0, NULL), ZS_E_INVALID_ARGUMENT, "frames is NULL");
    EXPECT(zs_recording_skip(r, 5), ZS_E_NO_ARRAY, "5");
}

/* The recording's configurations that are refused before anything is written. */
static void bad_configs(void)
{
    zs_recording *r = (zs_recording *)&r; /* not NULL: create must clear it */
    const char *dup =
        "{\"arrays\": [{\"key\": \"a\", \"array\": {\"shape\": [0, 8, 8],"
        " \"chunk_shape\": [1, 8, 8], \"shard_shape\": [1, 8, 8]}}, {\"key\": \"a\","
        " \"array\": {\"shape\": [0, 4, 4], \"chunk_shape\": [1, 4, 4], \"shard_shape\": [1, 4, 4]}}]}";
    EXPECT(zs_recording_create(path("dup.zarr"), dup, &r), ZS_E_INVALID_CONFIG,
           "given twice");
    CHECK(r == NULL, "a failed create stores NULL");
    CHECK(!exists(path("dup.zarr")), "nothing is left on disk");

    const char *nested =
        "{\"arrays\": [{\"key\": \"a\", \"array\": {\"shape\": [0, 8, 8],"
        " \"chunk_shape\": [1, 8, 8], \"shard_shape\": [1, 8, 8]}}, {\"key\": \"a/b\","
        " \"array\": {\"shape\": [0, 4, 4], \"chunk_shape\": [1, 4, 4], \"shard_shape\": [1, 4, 4]}}]}";
    EXPECT(zs_recording_create(path("nested.zarr"), nested, &r), ZS_E_INVALID_CONFIG,
           "inside another");
    const char *dotdot =
        "{\"arrays\": [{\"key\": \"../a\", \"array\": {\"shape\": [0, 8, 8],"
        " \"chunk_shape\": [1, 8, 8], \"shard_shape\": [1, 8, 8]}}]}";
    EXPECT(zs_recording_create(path("dotdot.zarr"), dotdot, &r), ZS_E_INVALID_CONFIG,
           "../a");
    EXPECT(zs_recording_create(path("none.zarr"), "{\"arrays\": []}", &r),
           ZS_E_INVALID_CONFIG, "arrays");
    /* A key in the wrong section is refused, naming its place. */
    EXPECT(zs_recording_create(path("sec.zarr"),
                               "{\"arrays\": [{\"key\": \"a\", \"writer\": {\"threads\": 2}}]}",
                               &r),
           ZS_E_INVALID_CONFIG, "arrays[0].writer: unknown field `writer`");
    EXPECT(zs_recording_create(path("sec.zarr"),
                               "{\"writer\": {\"shape\": [0, 8, 8]}, \"arrays\": [{\"key\": \"a\"}]}",
                               &r),
           ZS_E_INVALID_CONFIG, "writer.shape: unknown field `shape`");
    /* The deprecated flat form: an array key at the top level says where it goes. */
    EXPECT(zs_recording_create(path("top.zarr"),
                               "{\"shape\": [0, 8, 8], \"arrays\": [{\"key\": \"a\"}]}", &r),
           ZS_E_INVALID_CONFIG, "each entry of `arrays`");
    /* A recording option in an array says where it goes. */
    const char *option_in_array =
        "{\"arrays\": [{\"key\": \"a\", \"threads\": 2, \"shape\": [0, 8, 8],"
        " \"chunk_shape\": [1, 8, 8], \"shard_shape\": [1, 8, 8]}]}";
    EXPECT(zs_recording_create(path("opt.zarr"), option_in_array, &r), ZS_E_INVALID_CONFIG,
           "recording option");
    EXPECT(zs_recording_create(path("x.zarr"), "{\"arrays\": [", &r), ZS_E_INVALID_CONFIG,
           "config_json");
    EXPECT(zs_recording_create(NULL, dup, &r), ZS_E_INVALID_ARGUMENT, "root is NULL");
    EXPECT(zs_recording_create("", dup, &r), ZS_E_INVALID_ARGUMENT, "root is empty");
    EXPECT(zs_recording_create(path("x.zarr"), NULL, &r), ZS_E_INVALID_ARGUMENT,
           "config_json is NULL");
    EXPECT(zs_recording_create(path("x.zarr"), dup, NULL), ZS_E_INVALID_ARGUMENT,
           "out is NULL");
    CHECK(!exists(path("x.zarr")), "nothing is left on disk");
}

/* A group zarrstream did not make is refused, and joined with "existing_group". */
static void foreign_group(void)
{
    const char *root = path("foreign.zarr");
    CHECK(make_dir(root) == 0, "mkdir %s", root);
    FILE *f = fopen(path("foreign.zarr/zarr.json"), "w");
    CHECK(f != NULL, "create zarr.json");
    fputs("{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"lab\": 1}}", f);
    fclose(f);
    const char *arrays =
        "\"arrays\": [{\"key\": \"a\", \"array\": {\"shape\": [0, 8, 8],"
        " \"chunk_shape\": [1, 8, 8], \"shard_shape\": [1, 8, 8]}}]}";
    char config[512];
    snprintf(config, sizeof config, "{\"writer\": {\"threads\": 1}, %s", arrays);
    zs_recording *r = NULL;
    EXPECT(zs_recording_create(root, config, &r), ZS_E_EXISTS, "did not create");
    snprintf(config, sizeof config,
             "{\"writer\": {\"threads\": 1, \"existing_group\": true}, %s", arrays);
    OK(zs_recording_create(root, config, &r));
    zs_recording_abort(r, "the test stops here");
    const char *doc = read_file(path("foreign.zarr/a/zarr.json"));
    CHECK(doc != NULL && strstr(doc, "the test stops here") != NULL,
          "the abort's reason is in the array's zarr.json: %s", doc ? doc : "(none)");
    doc = read_file(path("foreign.zarr/zarr.json"));
    CHECK(doc != NULL && strstr(doc, "\"lab\"") != NULL && strstr(doc, "zarrstream") == NULL,
          "the foreign group's zarr.json is left as it was: %s", doc ? doc : "(none)");
    zs_recording_abort(NULL, NULL); /* a no-op */
}

/* zs_writer: N frames, finish, resume with "resume": true, M more. */
static void writer_resume(void)
{
    const char *store = path("w.zarr");
    const char *base = "{\"array\": {\"shape\": [0, 16, 16], \"chunk_shape\": [1, 16, 16],"
                       " \"shard_shape\": [4, 16, 16]}, \"writer\": {\"threads\": 1%s}}";
    char config[512];
    static uint16_t frame[HW * WW];
    uint32_t t = 0;
    for (int run = 0; run < 2; run++) {
        snprintf(config, sizeof config, base, run ? ", \"resume\": true" : "");
        zs_writer *w = NULL;
        OK(zs_writer_create(store, config, &w));
        for (uint32_t end = run ? NW_A + NW_B : NW_A; t < end; t++) {
            for (uint32_t y = 0; y < HW; y++)
                for (uint32_t x = 0; x < WW; x++)
                    frame[y * WW + x] = pixel_w(t, y, x);
            OK(zs_writer_push(w, frame, sizeof frame));
        }
        char *stats = NULL;
        OK(zs_writer_finish(w, &stats));
        zs_string_free(stats);
    }
    /* Resuming with another specification, or with overwrite, is refused. */
    zs_writer *w = (zs_writer *)&w;
    EXPECT(zs_writer_create(store,
                            "{\"array\": {\"shape\": [0, 16, 16], \"chunk_shape\": [1, 8, 16],"
                            " \"shard_shape\": [4, 16, 16]}, \"writer\": {\"resume\": true}}",
                            &w),
           ZS_E_SPEC_MISMATCH, "chunk_shape");
    CHECK(w == NULL, "a failed create stores NULL");
    snprintf(config, sizeof config, base, ", \"resume\": true, \"overwrite\": true");
    EXPECT(zs_writer_create(store, config, &w), ZS_E_INVALID_CONFIG, "cannot be combined");
    snprintf(config, sizeof config, base, ", \"resume\": true");
    EXPECT(zs_writer_create(path("absent.zarr"), config, &w), ZS_E_IO, "absent.zarr");
}

static void *push_closed_thread(void *arg)
{
    static uint8_t frame[H1 * W1];
    EXPECT(zs_recording_push(arg, 1, frame, sizeof frame), ZS_E_CLOSED, "closed");
    return NULL;
}

/* A panic inside the library: ZS_E_INTERNAL, never an unwind into C. */
static void internal(const char *mode)
{
    zs_recording *r = (zs_recording *)&r;
    if (strcmp(mode, "internal-create") == 0) {
        EXPECT(zs_recording_create(path("p.zarr"), config("", "zstd:1", 1), &r),
               ZS_E_INTERNAL, "zs_recording_create panicked");
        CHECK(r == NULL, "a failed create stores NULL");
        return;
    }
    OK(zs_recording_create(path("p.zarr"), config("", "zstd:1", 1), &r));
    static uint16_t frame0[H0 * W0];
    EXPECT(zs_recording_push(r, 0, frame0, sizeof frame0), ZS_E_INTERNAL,
           "zs_recording_push panicked");
    /* The recording cannot be trusted any more, on any thread and for any array. */
    EXPECT(zs_recording_push(r, 0, frame0, sizeof frame0), ZS_E_CLOSED, "closed");
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, push_closed_thread, r) == 0, "pthread_create");
    CHECK(pthread_join(thread, NULL) == 0, "pthread_join");
    size_t index;
    EXPECT(zs_recording_array_index(r, "cam0", &index), ZS_E_CLOSED, "closed");
    EXPECT(zs_recording_set_attribute(r, NULL, "a", "1"), ZS_E_CLOSED, "closed");
    char *stats = (char *)&stats;
    EXPECT(zs_recording_finish(r, &stats), ZS_E_CLOSED, "closed");
    CHECK(stats == NULL, "no statistics");
}

int main(int argc, char **argv)
{
    if (argc == 3) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
        internal(argv[1]);
        printf("recording: %s: %d checks passed\n", argv[1], checks);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s [internal-create | internal-recording] DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    const char *store = path("rec.zarr");

    char *estimate = NULL;
    OK(zs_recording_estimate_memory(config("", "zstd:1", 1), &estimate));
    printf("estimate: %s\n", estimate);
    zs_string_free(estimate);

    zs_recording *r = NULL;
    OK(zs_recording_create(store, config("\"chunk_order\": \"morton\",", "zstd:1", 1), &r));
    CHECK(r != NULL, "a recording");
    push_all(r, N0, 0, N1_A, 0, NI_A);
    uint64_t current = 0, peak = 0;
    OK(zs_recording_memory_in_use(r, &current, &peak));
    printf("memory: %llu %llu\n", (unsigned long long)current, (unsigned long long)peak);
    bad_input(r);

    /* Attributes: root (NULL or ""), an array by key, an image's group. */
    OK(zs_recording_set_attribute(r, NULL, "operator", "\"ada\""));
    OK(zs_recording_set_attribute(r, "", "tmp", "[1, 2]"));
    OK(zs_recording_set_attribute(r, "", "tmp", NULL));
    OK(zs_recording_set_attribute(r, "cam0", "exposure_ms", "10"));
    OK(zs_recording_set_attribute(r, "stage/cam1", "gain", "{\"db\": 3.5}"));
    OK(zs_recording_set_group_attribute(r, 2, "note", "\"hello\""));
    OK(zs_recording_set_group_attribute(r, 2, "tmp", "1"));
    OK(zs_recording_set_group_attribute(r, 2, "tmp", NULL));
    const char *doc = read_file(path("rec.zarr/zarr.json"));
    CHECK(doc != NULL && strstr(doc, "\"operator\"") && !strstr(doc, "\"tmp\""),
          "root zarr.json: %s", doc ? doc : "(none)");

    char *stats = NULL;
    OK(zs_recording_finish(r, &stats));
    CHECK(stats != NULL, "statistics");
    CHECK(strstr(stats, "{\"arrays\":{") == stats && strstr(stats, "\"cam0\":{") &&
              strstr(stats, "\"stage/cam1\":{") && strstr(stats, "\"img\":{") &&
              strstr(stats, "\"total\":{"),
          "statistics: %s", stats);
    printf("stats: %s\n", stats);
    zs_string_free(stats);
    EXPECT(zs_recording_finish(NULL, &stats), ZS_E_INVALID_ARGUMENT, "r is NULL");
    CHECK(stats == NULL, "no statistics on failure");

    /* The store exists now. */
    EXPECT(zs_recording_create(store, config("", "zstd:1", 1), &r), ZS_E_EXISTS,
           "already exists");
    /* Every array resumes, cam0's per-frame metadata included; finishing at once
     * leaves them as they were. */
    OK(zs_recording_create(store, config("\"resume\": true,", "zstd:1", 1), &r));
    OK(zs_recording_finish(r, NULL));
    /* Resume with another codec for stage/cam1: refused, nothing changes. */
    EXPECT(zs_recording_create(store, config("\"resume\": true,", "lz4:1", 0), &r),
           ZS_E_SPEC_MISMATCH, "codec differs");
    CHECK(r == NULL, "a failed create stores NULL");
    EXPECT(zs_recording_create(store,
                               config("\"resume\": true, \"overwrite\": true,", "zstd:1", 0),
                               &r),
           ZS_E_INVALID_CONFIG, "cannot be combined");
    /* Resume stage/cam1 and img with the same specification: they continue where they
     * ended (cam0, left out, stays as it is). */
    OK(zs_recording_create(store, config("\"resume\": true,", "zstd:1", 0), &r));
    push_all(r, 0, N1_A, N1_B, NI_A, NI_B);
    OK(zs_recording_finish(r, NULL));

    bad_configs();
    foreign_group();
    writer_resume();

    printf("counts: %d %d %d %d\n", N0, N1_A + N1_B, NI_A + NI_B, NW_A + NW_B);
    printf("recording: %d checks passed\n", checks);
    return 0;
}
