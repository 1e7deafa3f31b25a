/* The bit-exact reference's M_MM tile kernel (internal to ref/). */
#ifndef PLENA_REF_TILE_H
#define PLENA_REF_TILE_H

#include <stddef.h>
#include <stdint.h>

/* Rows of the streaming kernel's block: rows share each weight load. */
#define PLENA_REF_TILE_ROWS 4
/* From this many rows (and K tiles of at most PLENA_REF_TILE_BLOCK_MLEN), the
 * register-blocked kernel over packed weights (tile.c "many rows"). */
#define PLENA_REF_TILE_BLOCK_ROWS 12
#define PLENA_REF_TILE_BLOCK_MLEN 64

/* td[i][n] (i < R, any number of rows, n < np, row stride ldt) = the M_MM
 * contribution of K tile [k0, k0 + mlen) for row i of x (row stride ldx) and
 * column n of w ([K][np]): products rounded to f32, summed in increasing K
 * index, the first a bare product (docs/numerics.md "Matrix accumulation
 * order"); with add, td[i][n] = td[i][n] + that contribution (one more f32
 * add: the chunk accumulator of proj_ksplit). Each output is its own chain, so
 * vectorising across n keeps every bit. */
void plena_ref_tile_rows(const float *x, size_t ldx, uint32_t R, const float *w, uint32_t np,
                         uint32_t k0, uint32_t mlen, float *td, size_t ldt, int add);

#endif
