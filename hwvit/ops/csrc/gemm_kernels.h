#ifndef HWVIT_GEMM_KERNELS_H
#define HWVIT_GEMM_KERNELS_H

/* Exact int8 x int8 -> integer matrix products on x86-64 (hwvit/ops/native.py builds gemm_pack.c and
 * gemm_kernels.c into one library and loads it). This header holds what both files share.
 *
 * Two kinds of kernel share one tile loop, one packing order and one requantizer; they differ in
 * how many K-steps one int32 lane of a packed operand holds (its "group") and in the instruction
 * that multiplies two lanes:
 *
 *   KIND_INT16 (0), group 2, AVX2: both operands widened to int16; vpmaddwd forms
 *     a[2g]*w[2g] + a[2g+1]*w[2g+1] per int32 lane, exactly (|pair| <= 2 * 2^14 = 2^15), and vpaddd
 *     adds it to the int32 sum. The sum over K stays exact while K * 2^14 < 2^31: K < 2^17.
 *   KIND_AVXVNNI (1), KIND_AVX512VNNI (2), KIND_EMULATED (3), group 4: a is stored offset by +128 as
 *     uint8 (a + 128 = a XOR 0x80 in two's complement), w as int8; vpdpbusd adds
 *     sum_{j<4} (a[4g+j] + 128) * w[4g+j] to the int32 sum with no intermediate saturation
 *     (|quad| <= 4 * 255 * 128). Kind 1 is the VEX instruction of AVX-VNNI, kind 2 the EVEX one of
 *     AVX512-VNNI at 256 bits (AVX512VL), kind 3 the same sum formed by AVX2 instructions (two
 *     vpmaddwd of the even and odd bytes widened to int16: |pair| <= 2 * 255 * 128 < 2^16): it runs
 *     on any AVX2 CPU, so the tests check the group-4 packing, offset and tile on machines without
 *     VNNI. The offset sum stays exact while K * 255 * 128 < 2^31: K <= 2^16. The packed W carries
 *     each column's sum of w, and the tile's sums get -128 * colsum[n] back with the bias:
 *     sum (a + 128) w - 128 sum w = sum a w.
 *   KIND_AMX (4), KIND_AMX_EMULATED (5), group 4: the same offset operands and column sums, multiplied
 *     by AMX's tdpbusd (uint8 x int8 quads into int32, no saturation, as vpdpbusd) on 16 x 64-byte
 *     tiles: a block of RB_AMX = 32 rows of A by one NR = 24 column panel of W is four int32
 *     accumulator tiles (16 x 16 and 16 x 8 columns, twice), fed by two A tiles (16 rows x 64 bytes
 *     of K, read straight from packed A with its row stride) and two W tiles (16 groups x 16 or 8
 *     columns, read straight from the panel with its stride of NR lanes). K is padded to a multiple
 *     of 64 bytes (16 groups) and A's rows to a multiple of 32, with zeros that add nothing. Kind 5
 *     forms the same block's sums in plain C from the same layout: the tests check the AMX packing,
 *     padding and blocking on CPUs without AMX. The kernel asks Linux for the tile state first
 *     (hw_amx_enable: arch_prctl ARCH_REQ_XCOMP_PERM); without it AMX instructions fault.
 *   KIND_SPLIT7 (6), group 4, AVX2: the quads of vpmaddubsw (uint8 x int8 pairs summed into int16
 *     with saturation), vpmaddwd by ones and vpaddd, exact because the unsigned operand is kept to 7
 *     bits: |pair| <= 2 * 127 * 128 = 32512 < 2^15. An int8 a is split as a = a1 + a2 with
 *     a1 = clamp(a, -64, 63), packed as a1 + 64 in [0, 127] (the tile's sums get -64 * colsum back with
 *     the bias, as the VNNI kinds' -128 * colsum); an unsigned a (raw: P.V's probabilities) as
 *     a1 = min(a, 127), no offset. a2 = a - a1 is 0 unless |a| > 63 (or a > 127): those outliers are
 *     listed per row after the packed rows, (k, |a2|) in one int32 each, positive and negative apart,
 *     and added to the tile's int32 sums (sum over the row's outliers of a2 * w[n, k]: vpmaddubsw of
 *     |a2| placed in byte k % 4 against the panel's group, by sign) before the bias and the requant. Every partial sum is a sum of terms
 *     (a1 + 64 + a2) * w or (a1 + 64) * w, |term| <= 192 * 128 (255 * 128 unsigned), so it stays in
 *     int32 under ops.gemm's bound K * 255 * 128 + |bias| < 2^31; K <= 2^16 (the list's 16 bits of k).
 * Every operation is on integers. Results are written as int64 with an int64 bias per output column
 * added on the way out, or (hw_linear) requantized in the tile and written as int8/int16.
 *
 * Layouts (K is padded with zeros in W to a multiple of the group, which adds nothing):
 *   packed A: rows padded to a multiple of MR (RB_AMX for the AMX kinds); row m holds its groups,
 *             one int32 lane each; KIND_SPLIT7 then holds, per padded row, K + 2 int32: the counts of
 *             the row's positive and negative outliers, the positive ones from the third slot up and
 *             the negative ones from the last slot down, each as (k << 16) | |a2|.
 *   packed W: panels of NR = 8 * NV output columns; panel p, group g holds, for j = 0..NR-1, the lane
 *             of column p*NR + j (zero past N); group 4 kinds then hold NR int32 column sums per
 *             panel, after all the panels.
 * The microkernel keeps MR x NR int32 sums in MR * NV = 12 of the 16 ymm registers.
 */
#define _GNU_SOURCE /* syscall() */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MR 4 /* the tile below is written out for MR = 4, NV = 3 */
#define NV 3
#define NR (8 * NV)
#define A_BLOCK_BYTES (384 * 1024)
#define RB_AMX 32 /* rows of A per AMX block: two 16-row A tiles */
#define KG_AMX 16 /* groups of 4 bytes per A tile row: 64 bytes of K */

enum {
    KIND_INT16 = 0,
    KIND_AVXVNNI = 1,
    KIND_AVX512VNNI = 2,
    KIND_EMULATED = 3,
    KIND_AMX = 4,
    KIND_AMX_EMULATED = 5,
    KIND_SPLIT7 = 6
};

/* Compilers that know the VNNI target names (gcc 11, clang 12 on): otherwise kinds 1 and 2 are not
 * built and hw_vnni_built() says so. */
#ifndef HW_CAN_VNNI
#if defined(__clang__)
#define HW_CAN_VNNI (__clang_major__ >= 12)
#elif defined(__GNUC__)
#define HW_CAN_VNNI (__GNUC__ >= 11)
#else
#define HW_CAN_VNNI 0
#endif
#endif

static inline int is_amx(int64_t kind) { return kind == KIND_AMX || kind == KIND_AMX_EMULATED; }
static inline int64_t group_of(int64_t kind) { return kind == KIND_INT16 ? 2 : 4; }
static inline int64_t groups_of(int64_t kind, int64_t k) {
    const int64_t g = (k + group_of(kind) - 1) / group_of(kind);
    return is_amx(kind) ? (g + KG_AMX - 1) / KG_AMX * KG_AMX : g;
}
static inline int64_t block_rows(int64_t kind) { return is_amx(kind) ? RB_AMX : MR; }
static inline int64_t rows_padded(int64_t kind, int64_t m) { return (m + block_rows(kind) - 1) / block_rows(kind) * block_rows(kind); }
static inline int64_t panels_of(int64_t n) { return (n + NR - 1) / NR; }

/* gemm_pack.c: the sizes of the packed operands, which the products step through */
int64_t hw_packed_a_size(int64_t kind, int64_t m, int64_t k);
int64_t hw_packed_w_size(int64_t kind, int64_t n, int64_t k);

#endif
