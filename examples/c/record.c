/*
 * record.c: a simulated camera recorded into a sharded Zarr v3 array with zarrstream's
 * C API.
 *
 *     record STORE [FRAMES]
 *
 * Pushes FRAMES (default 64) frames of 256 x 256 uint16 into a new array at STORE
 * (inner chunks of 128 x 128, shards of 16 frames, blosc-lz4) and prints the statistics
 * that zs_writer_finish returns, as JSON on the last line. Before it: the memory estimate
 * (zs_estimate_memory, a line "estimate: JSON") and the memory the writer held before
 * finishing (zs_writer_memory_in_use, "memory: CURRENT PEAK"). Build it with the Makefile
 * beside this file.
 *
 * The camera is deterministic (camera_pixel), so a reader can recompute every frame:
 * capi/tests/check_store.py does, through zarr-python. Frames are pushed as the host's
 * uint16, which is the little-endian layout the array stores on x86 and ARM.
 */
#define _POSIX_C_SOURCE 200809L /* SIGXFSZ */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "zarrstream.h"

enum { HEIGHT = 256, WIDTH = 256, BEAD = 16 };

/* An offset of 100 counts, 4 bits of hashed noise, and a bright 16 x 16 bead drifting
 * across the sensor. */
static uint16_t camera_pixel(uint32_t t, uint32_t y, uint32_t x)
{
    uint32_t h = (x * 73856093u) ^ (y * 19349663u) ^ (t * 83492791u);
    h ^= h >> 13;
    uint16_t v = (uint16_t)(100u + (h & 15u));
    uint32_t by = (t * 3u) % (HEIGHT - BEAD), bx = (t * 5u) % (WIDTH - BEAD);
    if (y >= by && y < by + BEAD && x >= bx && x < bx + BEAD)
        v = (uint16_t)(v + 1000u);
    return v;
}

static void camera_frame(uint32_t t, uint16_t *frame)
{
    for (uint32_t y = 0; y < HEIGHT; y++)
        for (uint32_t x = 0; x < WIDTH; x++)
            frame[y * WIDTH + x] = camera_pixel(t, y, x);
}

int main(int argc, char **argv)
{
#ifdef SIGXFSZ /* Windows has no file size limit signal (nor RLIMIT_FSIZE) */
    /* A file growing past RLIMIT_FSIZE (ulimit -f) makes the kernel send SIGXFSZ, whose
     * default action kills the process; ignored, the library returns ZS_E_IO (EFBIG) and
     * every shard finished before stays intact. The program owns this disposition. */
    signal(SIGXFSZ, SIG_IGN);
#endif
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s STORE [FRAMES]\n", argv[0]);
        return 2;
    }
    const char *store = argv[1];
    char *end = NULL;
    long frames = argc == 3 ? strtol(argv[2], &end, 10) : 64;
    if (frames < 0 || (end != NULL && *end != '\0')) {
        fprintf(stderr, "record: FRAMES must be a number >= 0\n");
        return 2;
    }

    /* ANCHOR: writer */
    /* The keys and defaults are those of the Rust API (see zs_writer_create). */
    const char *config =
        "{\"array\": {\"shape\": [0, 256, 256], \"chunk_shape\": [1, 128, 128],"
        " \"shard_shape\": [16, 256, 256], \"dtype\": \"uint16\", \"codec\": \"lz4:1\","
        " \"dimension_names\": [\"t\", \"y\", \"x\"],"
        " \"attributes\": {\"camera\": \"examples/c/record.c\"}},"
        " \"writer\": {\"threads\": 2}}";

    printf("zarrstream %s: recording %ld frames of %d x %d uint16 into %s\n", zs_version(),
           frames, HEIGHT, WIDTH, store);
    char *estimate = NULL;
    if (zs_estimate_memory(config, &estimate) != ZS_OK) {
        fprintf(stderr, "record: estimate: %s\n", zs_last_error());
        return 1;
    }
    printf("estimate: %s\n", estimate);
    zs_string_free(estimate);

    zs_writer *w = NULL;
    if (zs_writer_create(store, config, &w) != ZS_OK) {
        fprintf(stderr, "record: %s\n", zs_last_error());
        return 1;
    }

    size_t frame_bytes = sizeof(uint16_t) * HEIGHT * WIDTH;
    uint16_t *frame = malloc(frame_bytes);
    if (frame == NULL) {
        fprintf(stderr, "record: out of memory\n");
        zs_writer_abort(w);
        return 1;
    }
    long dropped = 0;
    for (long t = 0; t < frames; t++) {
        camera_frame((uint32_t)t, frame);
        int rc = zs_writer_push(w, frame, frame_bytes);
        if (rc < 0) {
            fprintf(stderr, "record: frame %ld: %s\n", t, zs_last_error());
            zs_writer_abort(w); /* keeps what was written, frees the writer */
            free(frame);
            return 1;
        }
        if (rc == ZS_DROPPED)
            dropped++;
    }
    free(frame);

    uint64_t current = 0, peak = 0;
    if (zs_writer_memory_in_use(w, &current, &peak) != ZS_OK) {
        fprintf(stderr, "record: memory: %s\n", zs_last_error());
        zs_writer_abort(w);
        return 1;
    }
    printf("memory: %llu %llu\n", (unsigned long long)current, (unsigned long long)peak);

    char *stats = NULL;
    if (zs_writer_finish(w, &stats) != ZS_OK) { /* frees the writer in any case */
        fprintf(stderr, "record: finish: %s\n", zs_last_error());
        return 1;
    }
    printf("%ld frames pushed, %ld dropped; statistics:\n%s\n", frames, dropped, stats);
    zs_string_free(stats);
    /* ANCHOR_END: writer */
    return 0;
}
