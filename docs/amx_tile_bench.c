/* The AMX tile of hwvit's C kernels, timed on one thread (docs/performance.md): the
 * kernel's 32 x 24 block (tile_amx) against variants of it, and the whole hw_linear (block, requant,
 * stores) with W reused (it stays in L2 where it fits) and with W cycled through 16 copies (it comes
 * from L3 or memory, as in a forward, where every layer's W is new), over all panels in one call and
 * in calls of 2 panels (a 16-thread forward's jobs), with the packed operands on a cache line and
 * 16 bytes past one. It includes the kernel sources
 * for their static functions. Variants: the loads and tdpbusd reordered; no tile stores (what the
 * stores cost); 32-column panels (a 128-byte W stride, no half-width tiles: the layout a 32-wide
 * AMX panel would have); 32 x 16 blocks with the inputs double-buffered. Only hw_linear computes
 * hwvit's integers; the variants time loads and tdpbusd on filler data.
 *
 *   cc -O3 -mavx2 -std=gnu99 -o /tmp/amx_tile_bench docs/amx_tile_bench.c && /tmp/amx_tile_bench
 *
 * Needs a CPU with AMX-INT8 and a Linux that grants the tile state (5.16 on); elsewhere it says so.
 */
#define _GNU_SOURCE
#include "../hwvit/ops/csrc/gemm_pack.c"
#include "../hwvit/ops/csrc/gemm_kernels.c"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static const uint8_t CFG_FULL[64] __attribute__((aligned(64))) = {
    1, 0, [16] = 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, [48] = 16, 16, 16, 16, 16, 16, 16, 16};

#define T __attribute__((target("amx-tile,amx-int8"))) static
T void cfg_full(void) { _tile_loadconfig(CFG_FULL); }
T void cfg_std(void) { _tile_loadconfig(AMX_CFG); }

T void v1(const int32_t *arow, int64_t ng, const int32_t *wq, int32_t out[RB_AMX][NR]) { /* reordered */
    const int64_t as = ng * 4, ws = NR * 4;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t g = 0; g < ng; g += KG_AMX) {
        _tile_loadd(4, arow + g, as); _tile_loadd(6, wq + g * NR, ws); _tile_dpbusd(0, 4, 6);
        _tile_loadd(7, wq + g * NR + 16, ws); _tile_dpbusd(1, 4, 7);
        _tile_loadd(5, arow + 16 * ng + g, as); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, out[0], ws); _tile_stored(1, out[0] + 16, ws); _tile_stored(2, out[16], ws); _tile_stored(3, out[16] + 16, ws);
}
T void v0_nostore(const int32_t *arow, int64_t ng, const int32_t *wq) {
    const int64_t as = ng * 4, ws = NR * 4;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t g = 0; g < ng; g += KG_AMX) {
        _tile_loadd(4, arow + g, as); _tile_loadd(5, arow + 16 * ng + g, as);
        _tile_loadd(6, wq + g * NR, ws); _tile_loadd(7, wq + g * NR + 16, ws);
        _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
}
/* 32 x 32 block from 32-column panels (stride 128): the layout a 32-wide panel would have */
T void v32(const int32_t *arow, int64_t ng, const int32_t *wq, int32_t *out) {
    const int64_t as = ng * 4, ws = 128;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t g = 0; g < ng; g += KG_AMX) {
        _tile_loadd(4, arow + g, as); _tile_loadd(6, wq + g * 32, ws); _tile_dpbusd(0, 4, 6);
        _tile_loadd(7, wq + g * 32 + 16, ws); _tile_dpbusd(1, 4, 7);
        _tile_loadd(5, arow + 16 * ng + g, as); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, out, 128); _tile_stored(1, out + 16, 128); _tile_stored(2, out + 512, 128); _tile_stored(3, out + 528, 128);
}
/* 32 x 16 block, 16-column panels (stride 64), inputs double-buffered (tiles 2-4 / 5-7) */
T void v16db(const int32_t *arow, int64_t ng, const int32_t *wq, int32_t *out) {
    const int64_t as = ng * 4, ws = 64;
    _tile_zero(0); _tile_zero(1);
    int64_t g = 0;
    for (; g + 2 * KG_AMX <= ng; g += 2 * KG_AMX) {
        _tile_loadd(2, arow + g, as); _tile_loadd(3, arow + 16 * ng + g, as); _tile_loadd(4, wq + g * 16, ws);
        _tile_loadd(5, arow + g + 16, as); _tile_loadd(6, arow + 16 * ng + g + 16, as); _tile_loadd(7, wq + (g + 16) * 16, ws);
        _tile_dpbusd(0, 2, 4); _tile_dpbusd(1, 3, 4); _tile_dpbusd(0, 5, 7); _tile_dpbusd(1, 6, 7);
    }
    for (; g < ng; g += KG_AMX) {
        _tile_loadd(2, arow + g, as); _tile_loadd(3, arow + 16 * ng + g, as); _tile_loadd(4, wq + g * 16, ws);
        _tile_dpbusd(0, 2, 4); _tile_dpbusd(1, 3, 4);
    }
    _tile_stored(0, out, 64); _tile_stored(1, out + 256, 64);
}

static void *al(size_t n) { void *p = aligned_alloc(64, (n + 63) / 64 * 64); memset(p, 1, n); return p; }

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (hw_amx_enable() != 0) { printf("no AMX here: the CPU lacks AMX-INT8 or Linux did not grant the tile state\n"); return 1; }
    int ks[] = {64, 256, 768, 3072};
    int ns[] = {2304, 2304, 2304, 768};
    for (int t = 0; t < 4; t++) {
        const int64_t m = 197, k = ks[t], n = ns[t], mp = 224, ng = groups_of(KIND_AMX, k), np = panels_of(n);
        int32_t *pa = al(mp * ng * 4), *pw = al(np * NR * (ng + 1) * 4), *pw32 = al((n / 32 + 1) * 32 * ng * 4);
        int32_t out[RB_AMX][NR] __attribute__((aligned(64)));
        int32_t o32[32 * 32] __attribute__((aligned(64)));
        const int64_t blocks = (mp / 32) * np, reps = 20000000 / (blocks * ng) + 1;
        double mac = (double)mp * n * ng * 4 * reps;
        double t0; volatile int32_t sink = 0;
#define RUN(label, CFG, BODY, nblk) \
        CFG(); for (int w = 0; w < 2; w++) { BODY } t0 = now(); for (int64_t r = 0; r < reps; r++) { BODY } \
        { double s = now() - t0; printf("K=%5d %-22s %7.1f ns/block %6.1f ns/step %7.1f GMAC/s\n", (int)k, label, 1e9 * s / (reps * (nblk)), \
          1e9 * s / (reps * (nblk) * (ng / 16)), mac / s / 1e9); } amx_release(); sink += out[0][0] + o32[0];
        RUN("v0 (kernel's tile)", cfg_std, for (int64_t p = 0; p < np; p++) for (int64_t b = 0; b < mp; b += 32) tile_amx(pa + b * ng, ng, pw + p * ng * NR, out);, blocks)
        RUN("v1 reordered", cfg_std, for (int64_t p = 0; p < np; p++) for (int64_t b = 0; b < mp; b += 32) v1(pa + b * ng, ng, pw + p * ng * NR, out);, blocks)
        RUN("v0 no stores", cfg_std, for (int64_t p = 0; p < np; p++) for (int64_t b = 0; b < mp; b += 32) v0_nostore(pa + b * ng, ng, pw + p * ng * NR);, blocks)
        RUN("v32 (32-col panels)", cfg_full, for (int64_t p = 0; p < n / 32; p++) for (int64_t b = 0; b < mp; b += 32) v32(pa + b * ng, ng, pw32 + p * ng * 32, o32);, (mp / 32) * (n / 32))
        RUN("v16 double-buffered", cfg_full, for (int64_t p = 0; p < n / 16; p++) for (int64_t b = 0; b < mp; b += 32) v16db(pa + b * ng, ng, pw32 + p * ng * 16, o32);, (mp / 32) * (n / 16))
        /* the whole kernel: requantized int8 out, single thread, vs the AVX512-VNNI tile */
        {
            int8_t *a8 = al(m * k), *w8 = al(n * k), *y = al(m * n * 8);
            for (int64_t i = 0; i < m * k; i++) a8[i] = (int8_t)(rand() % 60 - 30);
            for (int64_t i = 0; i < n * k; i++) w8[i] = (int8_t)(rand() % 256 - 128);
            int64_t *bias = al(n * 8), *mult = al(n * 8), *shift = al(n * 8);
            for (int64_t i = 0; i < n; i++) bias[i] = 0, mult[i] = 1 << 30, shift[i] = 40;
            int kinds[] = {KIND_AMX, KIND_AVX512VNNI};
            const char *names[] = {"hw_linear amx", "hw_linear avx512vnni"};
            for (int q = 0; q < 2; q++) {
                int64_t kd = kinds[q], sa = hw_packed_a_size(kd, m, k);
                const int64_t sw = hw_packed_w_size(kd, n, k), copies = 16;
                int32_t *qa = al(sa * 4), *qw = al(copies * sw * 4);
                hw_pack_a(kd, a8, 1, m, k, qa);
                for (int64_t c = 0; c < copies; c++) hw_pack_w(kd, w8, 1, n, k, qw + c * sw);
                int64_t rp = reps / 4 + 16;
                /* W hot; W cold over all panels in one call and in calls of 2 panels (a 16-thread
                 * forward's jobs); both again with the packed operands 16 bytes past a cache line */
                int32_t *qa16 = al(sa * 4 + 64), *qw16 = al(copies * sw * 4 + 64);
                memcpy(qa16 + 4, qa, sa * 4); /* the same packed operands 16 bytes past a cache line */
                memcpy(qw16 + 4, qw, copies * sw * 4);
                for (int mode = 0; mode < 5; mode++) {
                    const int cold = mode > 0, off = mode >= 3 ? 4 : 0, step = mode == 2 || mode == 4 ? 2 : np;
                    static const char *label[] = {"W hot", "W cold", "jobs2", "W cold +16", "jobs2 +16"};
                    const int32_t *ga = off ? qa16 + 4 : qa, *gw = off ? qw16 + 4 : qw;
                    hw_linear(kd, ga, gw, m, k, n, 0, 0, m, 0, np, bias, mult, shift, -128, 127, 1, y, 0);
                    t0 = now();
                    for (int64_t r = 0; r < rp; r++)
                        for (int64_t p0 = 0; p0 < np; p0 += step)
                            hw_linear(kd, ga, gw + (cold ? r % copies : 0) * sw, m, k, n, 0, 0, m, p0,
                                      p0 + step < np ? p0 + step : np, bias, mult, shift, -128, 127, 1, y, 0);
                    double s = now() - t0;
                    printf("K=%5d %-22s %-10s %7.1f ns/block %8.1f us/call %7.1f GMAC/s\n", (int)k, names[q],
                           label[mode], 1e9 * s / (rp * blocks), 1e6 * s / rp, (double)m * n * k * rp / s / 1e9);
                }
                free(qa); free(qw); free(qa16); free(qw16);
            }
            free(a8); free(w8); free(y); free(bias); free(mult); free(shift);
        }
        /* config + release per call */
        t0 = now();
        for (int i = 0; i < 100000; i++) { amx_config(); amx_release(); }
        printf("config+release %.1f ns\n", 1e9 * (now() - t0) / 100000);
        free(pa); free(pw); free(pw32);
        (void)sink;
    }
    return 0;
}
