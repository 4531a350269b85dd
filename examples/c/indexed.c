/*
 * indexed.c: frames written by index, in the order a microscope acquires them (run by
 * capi/tests/c_api.rs, which reads the stores back with zarrs).
 *
 *     indexed DIR
 *
 * DIR/ctz.zarr: t=4, c=2, 48 x 64 uint16 frames stored t, c, y, x and acquired
 * channel-first (every time point of channel 1, then of channel 0) with the order
 * declared in config_json; frame (t, c) holds value (t * 2 + c) * 1000 + (i % 1000) at
 * element i. DIR/single.zarr: one 48 x 64 frame (rank 2) of frame (0, 0)'s values.
 * Each bad index is refused with its code and nothing written is touched. Prints
 * "indexed: N checks passed".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarrstream.h"

#define H 48
#define W 64
#define FRAME_BYTES (H * W * 2)

static int checks;
static uint16_t frame[H * W];

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "indexed.c:%d: check failed: %s\n  ", __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n  zs_last_error(): \"%s\"\n", zs_last_error());           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* `rc` is `want` and this thread's last error contains `part`. */
#define EXPECT(rc, want, part)                                                             \
    do {                                                                                   \
        int rc_ = (rc);                                                                    \
        CHECK(rc_ == (want), "%s returned %d, expected %s (%d)", #rc, rc_, #want, (want)); \
        CHECK(strstr(zs_last_error(), (part)) != NULL, "the message lacks \"%s\"", part); \
    } while (0)

static void fill(uint64_t t, uint64_t c)
{
    for (int i = 0; i < H * W; i++)
        frame[i] = (uint16_t)((t * 2 + c) * 1000 + (uint64_t)(i % 1000));
}

static void finish_ok(zs_writer *w)
{
    char *stats = NULL;
    int rc = zs_writer_finish(w, &stats);
    CHECK(rc == ZS_OK && stats != NULL, "finish: %d", rc);
    zs_string_free(stats);
}

static void channel_first(const char *dir)
{
    char store[4096];
    snprintf(store, sizeof store, "%s/ctz.zarr", dir);
    const char *cfg = "{\"array\": {\"shape\": [4, 2, 48, 64], \"chunk_shape\": [1, 1, 16, 32], "
                      "\"shard_shape\": [2, 1, 48, 64], "
                      "\"dimension_names\": [\"t\", \"c\", \"y\", \"x\"]}, "
                      "\"writer\": {\"acquisition_order\": [\"c\", \"t\"], \"threads\": 1}}";
    zs_writer *w = NULL;
    int rc = zs_writer_create(store, cfg, &w);
    CHECK(rc == ZS_OK && w != NULL, "create: %d", rc);
    for (int c = 1; c >= 0; c--) {
        for (uint64_t t = 0; t < 4; t++) {
            uint64_t index[2] = {t, (uint64_t)c};
            fill(t, (uint64_t)c);
            rc = zs_writer_write_frame(w, index, 2, frame, FRAME_BYTES);
            CHECK(rc == ZS_OK, "write_frame (%d, %d): %d", (int)t, c, rc);
        }
        if (c == 1) {
            /* Bad indices, each refused without touching what was written. */
            uint64_t again[2] = {2, 1};
            fill(0, 0);
            EXPECT(zs_writer_write_frame(w, again, 2, frame, FRAME_BYTES),
                   ZS_E_DUPLICATE_FRAME, "was already written");
            uint64_t out[2] = {4, 0};
            EXPECT(zs_writer_write_frame(w, out, 2, frame, FRAME_BYTES), ZS_E_INDEX,
                   "coordinate 4 on axis 0 is out of bounds (the axis has size 4)");
            EXPECT(zs_writer_write_frame(w, out, 1, frame, FRAME_BYTES), ZS_E_INDEX,
                   "has 1 coordinates but the array has 2 leading axes");
            EXPECT(zs_writer_write_frame(w, NULL, 2, frame, FRAME_BYTES),
                   ZS_E_INVALID_ARGUMENT, "index is NULL");
            EXPECT(zs_writer_write_frame(w, out, 2, frame, FRAME_BYTES - 2), ZS_E_FRAME_SIZE,
                   "expected 6144 bytes");
            EXPECT(zs_writer_push(w, frame, FRAME_BYTES), ZS_E_INVALID_ARGUMENT,
                   "written by index");
        }
    }
    finish_ok(w);

    /* Order and budget errors at creation. */
    snprintf(store, sizeof store, "%s/bad-order.zarr", dir);
    w = NULL;
    EXPECT(zs_writer_create(store,
                            "{\"array\": {\"shape\": [0, 2, 48, 64], \"chunk_shape\": [1, 1, 16, 32], "
                            "\"shard_shape\": [2, 1, 48, 64]}, \"writer\": {\"acquisition_order\": [1, 0]}}",
                            &w),
           ZS_E_INVALID_CONFIG, "an unbounded axis 0 must be the outermost loop");
    CHECK(w == NULL, "no writer on failure");
    EXPECT(zs_writer_create(store,
                            "{\"array\": {\"shape\": [0, 2, 48, 64], \"chunk_shape\": [1, 1, 16, 32], "
                            "\"shard_shape\": [2, 1, 48, 64]}, \"writer\": {\"max_open_shards\": 4}}",
                            &w),
           ZS_E_WORKING_SET, "max_open_shards allows 4");
}

static void single(const char *dir)
{
    char store[4096];
    snprintf(store, sizeof store, "%s/single.zarr", dir);
    zs_writer *w = NULL;
    int rc = zs_writer_create(store,
                              "{\"array\": {\"shape\": [48, 64], \"chunk_shape\": [16, 32], "
                              "\"shard_shape\": [48, 64]}, \"writer\": {\"threads\": 1}}",
                              &w);
    CHECK(rc == ZS_OK && w != NULL, "create rank 2: %d", rc);
    fill(0, 0);
    rc = zs_writer_write_frame(w, NULL, 0, frame, FRAME_BYTES);
    CHECK(rc == ZS_OK, "write_frame rank 2: %d", rc);
    EXPECT(zs_writer_write_frame(w, NULL, 0, frame, FRAME_BYTES), ZS_E_DUPLICATE_FRAME,
           "was already written");
    finish_ok(w);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: indexed DIR\n");
        return 2;
    }
    channel_first(argv[1]);
    single(argv[1]);
    printf("indexed: %d checks passed\n", checks);
    return 0;
}
