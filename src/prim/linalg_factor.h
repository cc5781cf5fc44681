/*
 * Matrix factorizations and inverses (weft.h's wf_linalg_* section).
 * Internal.
 *
 * Each primitive takes one input a (..., m, n), float32 or float64 (eig,
 * eigh and svd: complex64 too), and computes every matrix of the leading
 * (batch) dims on its own. Results
 * with several parts are packed into one output of a's dtype that the ops
 * slice (so each primitive has one output and one kernel run):
 *   cholesky, inv, tri_inv  (..., n, n)         the result itself
 *   lu                      (..., m + 2, max(m, n)): rows [0, m) cols
 *                           [0, n) L and U (L's unit diagonal implied),
 *                           row m the k = min(m, n) LAPACK row swaps,
 *                           row m + 1 the m row indices p with a = L[p] @ U
 *   qr                      (..., m + k, n): Q in rows [0, m) cols [0, k),
 *                           R in rows [m, m + k)
 *   eigh                    (..., n + 1, n): row 0 the eigenvalues
 *                           (ascending), rows [1, n + 1) the eigenvectors
 *                           as columns
 *   svd                     (..., m + 1 + n, max(m, n)): U (m, m) in rows
 *                           [0, m), S (k, descending) in row m, Vt (n, n)
 *                           in rows [m + 1, m + 1 + n)
 *                           (complex64 eigh and svd: the eigenvalues and S
 *                           are stored with a zero imaginary part, the op
 *                           takes their real part)
 *   eig                     (..., n + 1, n) complex64 (a may be complex64
 *                           too): row 0 the eigenvalues, rows [1, n + 1)
 *                           the eigenvectors as columns
 * A non-positive-definite matrix is not an error: cholesky fills that
 * matrix's result with NaN (a semi-definite one, whose pivot is zero to
 * the dtype's rounding, gets a finite factor); lu keeps a zero pivot (as
 * LAPACK's getrf). An exact zero pivot fails inv / tri_inv (WF_ERR_KERNEL,
 * as MLX), and so does an eig whose QR iteration does not converge.
 */
#ifndef WEFT_PRIM_LINALG_FACTOR_H
#define WEFT_PRIM_LINALG_FACTOR_H

#include <stdbool.h>

#include "prim/prims.h"

enum wf_factor_kind {
    WF_FACTOR_CHOLESKY = 0,
    WF_FACTOR_INV,
    WF_FACTOR_TRI_INV,
    WF_FACTOR_LU,
    WF_FACTOR_QR,
    WF_FACTOR_EIGH,
    WF_FACTOR_SVD,
    WF_FACTOR_EIG,
    WF_FACTOR_KIND_COUNT
};

/* upper: cholesky returns U (a = U^T U), tri_inv reads the upper triangle,
 * eigh reads the upper triangle (UPLO "U"); unused by the others. */
typedef struct wf_factor_params {
    int kind; /* enum wf_factor_kind */
    bool upper;
} wf_factor_params;

extern const wf_prim_def wf__prim_linalg_cholesky;
extern const wf_prim_def wf__prim_linalg_inv;
extern const wf_prim_def wf__prim_linalg_tri_inv;
extern const wf_prim_def wf__prim_linalg_lu;
extern const wf_prim_def wf__prim_linalg_qr;
extern const wf_prim_def wf__prim_linalg_eigh;
extern const wf_prim_def wf__prim_linalg_svd;
extern const wf_prim_def wf__prim_linalg_eig;

/* The primitive of `kind`. */
const wf_prim_def *wf__factor_prim(int kind);
/* The public op's name of `kind` ("wf_linalg_qr"), for messages. */
const char *wf__factor_op_name(int kind);
/* Checks a's description for `kind` (rank >= 2, float32 / float64 (eig,
 * eigh, svd: complex64 too), square where the kind needs it), recording
 * the error naming `op`. */
wf_status wf__factor_check(const char *op, int kind, wf_dtype dtype, int ndim,
                           const int64_t *shape);

#endif
