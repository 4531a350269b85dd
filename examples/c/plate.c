/*
 * plate.c: an OME-Zarr high-content screening plate with zs_recording (run by
 * capi/tests/c_api.rs, which validates and reads it back with ome-zarr-models, the
 * ome-zarr reader and zarr-python: capi/tests/check_plate.py).
 *
 *     plate DIR
 *
 * DIR is an empty directory. Writes DIR/plate.ome.zarr: a plate of 2 rows (A, B) x 3
 * columns (1, 2, 3) without well B/2, 2 fields per well, 2 acquisitions (ids 0 and 7),
 * every field image uint16 16 x 16 (an OME-Zarr image), T frames each, pushed as a
 * screening microscope takes them: per time point, acquisition by acquisition, well by
 * well, each well's fields in turn, the array found by its key "ROW/COLUMN/PATH". Frame
 * t of the image with index i (its place in that order) is pixel(i, t, y, x), so a
 * reader can check it. On the way it checks that bad plates are ZS_E_INVALID_PLATE
 * naming the problem and leave nothing on disk.
 *
 * Prints "stats: {...}" and "plate: N checks passed"; the first check that fails
 * prints where and why and exits 1.
 */
#define _XOPEN_SOURCE 700
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zarrstream.h"

static int checks;

static void fail_at(int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "plate.c:%d: check failed: %s\n  ", line, cond);
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

enum { H = 16, W = 16, T = 3, FIELDS = 2, ACQUISITIONS = 2, WELLS = 5 };

static const char *const WELL[WELLS][2] = {
    {"A", "1"}, {"A", "2"}, {"A", "3"}, {"B", "1"}, {"B", "3"}};

static uint16_t pixel(uint32_t i, uint32_t t, uint32_t y, uint32_t x)
{
    return (uint16_t)(i * 1000u + t * 100u + y * W + x);
}

/* Every field image: 16 x 16 uint16 OME-Zarr images with a pixel size. */
static const char *IMAGE =
    "\"image\": {\"array\": {\"shape\": [0, 16, 16], \"chunk_shape\": [1, 16, 16],"
    " \"shard_shape\": [2, 16, 16], \"dtype\": \"uint16\"},"
    " \"ome\": {\"pixel_size\": [0.5, 0.5]}}";

static char root[4200];

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* A recording config with this plate object and the image above. */
static const char *config(const char *plate)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "{\"writer\": {\"threads\": 2}, \"plate\": %s, %s}", plate, IMAGE);
    return buf;
}

/* Each bad plate is ZS_E_INVALID_PLATE naming the problem, and writes nothing. */
static void bad_plates(void)
{
    static const struct {
        const char *plate;
        const char *part;
    } cases[] = {
        {"{\"rows\": 2, \"columns\": 3, \"wells\": [\"A/1\", \"C/1\"]}",
         "well C/1 is outside the plate: it has no row \"C\""},
        {"{\"rows\": 2, \"columns\": 3, \"wells\": [\"B/4\"]}",
         "well B/4 is outside the plate: it has no column \"4\""},
        {"{\"rows\": 2, \"columns\": 3, \"fields\": 0}", "field count 0"},
        {"{\"rows\": 2, \"columns\": 3, \"wells\": [\"A/1\", \"A/1\"]}",
         "well A/1 is given twice"},
        {"{\"rows\": [\"A\", \"B-1\"], \"columns\": 3}", "plate row name \"B-1\""},
        {"{\"rows\": 0, \"columns\": 3}", "the plate has no rows"},
        {"{\"rows\": 1, \"columns\": 1, \"acquisitions\": [{\"id\": 3}, {\"id\": 3}]}",
         "acquisition id 3 is given twice"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zs_recording *r = (zs_recording *)&checks; /* must come back NULL */
        EXPECT(zs_recording_create(root, config(cases[k].plate), &r), ZS_E_INVALID_PLATE,
               cases[k].part);
        CHECK(r == NULL, "case %zu: *out is NULL on failure", k);
        CHECK(!exists(root), "case %zu: a refused plate leaves nothing", k);
    }
    /* Keys in the wrong place are config errors, not plate errors. */
    zs_recording *r = NULL;
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"plate\": {\"rows\": 1, \"columns\": 1}, \"arrays\": [], %s}", IMAGE);
    EXPECT(zs_recording_create(root, buf, &r), ZS_E_INVALID_CONFIG, "give `image`");
    EXPECT(zs_recording_create(root, "{\"plate\": {\"rows\": 1, \"columns\": 1}}", &r),
           ZS_E_INVALID_CONFIG, "a plate needs `image`");
    CHECK(!exists(root), "nothing written");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: plate DIR\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s/plate.ome.zarr", argv[1]);
    bad_plates();

    zs_recording *r = NULL;
    OK(zs_recording_create(
        root,
        config("{\"name\": \"C plate\", \"rows\": 2, \"columns\": [\"1\", \"2\", \"3\"],"
               " \"wells\": [\"A/1\", \"A/2\", \"A/3\", \"B/1\", \"B/3\"], \"fields\": 2,"
               " \"acquisitions\": [{\"id\": 0, \"name\": \"first\","
               " \"start_time\": 1700000000, \"end_time\": 1700000600},"
               " {\"id\": 7, \"name\": \"second\", \"description\": \"after staining\"}]}"),
        &r));
    CHECK(r != NULL, "a recording");
    /* The plate's own metadata attribute is the recording's. */
    EXPECT(zs_recording_set_attribute(r, NULL, "ome", "{}"), ZS_E_INVALID_ARGUMENT,
           "the plate's own metadata");
    OK(zs_recording_set_attribute(r, NULL, "screen", "{\"compound\": \"X\"}"));

    static uint16_t frame[H * W];
    for (uint32_t t = 0; t < T; t++) {
        uint32_t i = 0;
        for (uint32_t a = 0; a < ACQUISITIONS; a++) {
            for (uint32_t w = 0; w < WELLS; w++) {
                for (uint32_t f = 0; f < FIELDS; f++, i++) {
                    char key[32];
                    snprintf(key, sizeof key, "%s/%s/%u", WELL[w][0], WELL[w][1],
                             a * FIELDS + f);
                    size_t index = 999;
                    OK(zs_recording_array_index(r, key, &index));
                    CHECK(index == i, "%s is array %u, not %zu", key, i, index);
                    for (uint32_t y = 0; y < H; y++)
                        for (uint32_t x = 0; x < W; x++)
                            frame[y * W + x] = pixel(i, t, y, x);
                    OK(zs_recording_push(r, index, frame, sizeof frame));
                }
            }
        }
    }
    size_t index = 0;
    EXPECT(zs_recording_array_index(r, "B/2/0", &index), ZS_E_NO_ARRAY, "B/2/0");

    char *stats = NULL;
    OK(zs_recording_finish(r, &stats));
    CHECK(stats != NULL && strstr(stats, "\"B/3/3\"") != NULL, "stats name every image");
    printf("stats: %s\n", stats);
    zs_string_free(stats);
    printf("plate: %d checks passed\n", checks);
    return 0;
}
