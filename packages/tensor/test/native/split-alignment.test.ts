// probeSplitAlignment finds where a product may be cut into parts that give the whole product's bits, on
// stand-in sgemm functions whose summation order depends on a row's place in a register block (as OpenBLAS's
// AVX2 kernel's 24-row blocks do), and on the library this machine loads.
import { describe, expect, it } from "vitest";
import { loadBlas } from "../../src/backends/native/blas.js";
import { probeSkinnyRowSplit, probeSplitAlignment } from "../../src/backends/native/gemm.js";

type Sgemm = Parameters<typeof probeSplitAlignment>[0];

/**
 * Row-major C = op(A)·op(B) (beta 0) in f32, each element summed over k forward, or backward where `backwards`
 * says so for its row and column index within this call: a kernel whose order depends on the block.
 */
function blockedSgemm(backwards: (row: number, col: number) => boolean): Sgemm {
  return (_order, ta, tb, m, n, k, _alpha, a, lda, b, ldb, _beta, c, ldc) => {
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let sum = 0;
        const term = (p: number) =>
          Math.fround((ta === 112 ? a[p * lda + i] : a[i * lda + p]) * (tb === 112 ? b[j * ldb + p] : b[p * ldb + j]));
        if (backwards(i, j)) for (let p = k - 1; p >= 0; p--) sum = Math.fround(sum + term(p));
        else for (let p = 0; p < k; p++) sum = Math.fround(sum + term(p));
        c[i * ldc + j] = sum;
      }
  };
}

describe("probeSplitAlignment", () => {
  it("finds 24-row blocks and columns that cut anywhere, and none where the order follows the call's size", () => {
    expect(probeSplitAlignment(blockedSgemm((row) => row % 24 >= 16))).toEqual({ rows: 24, cols: 16 });
    expect(probeSplitAlignment(blockedSgemm((_row, col) => col % 32 >= 24))).toEqual({ rows: 16, cols: 32 });
    let calls = 0;
    const bySize: Sgemm = (...args) => {
      calls++;
      // The last few rows of every call sum the other way: no cut reproduces them.
      blockedSgemm((row) => row >= args[3] - 3)(...args);
    };
    expect(probeSplitAlignment(bySize)).toEqual({ rows: null, cols: 16 });
    expect(calls).toBeGreaterThan(0);
  }, 120_000);

  it("lets skinny products split by rows only where their row parts keep the bits", () => {
    expect(
      probeSkinnyRowSplit(
        blockedSgemm((row) => row % 24 >= 16),
        24,
      ),
    ).toBe(true);
    // A 16-row cut of a kernel with 24-row blocks changes sums.
    expect(
      probeSkinnyRowSplit(
        blockedSgemm((row) => row % 24 >= 16),
        16,
      ),
    ).toBe(false);
    // A small-matrix kernel for short calls only (as OpenBLAS has on some cores): parts sum another way.
    const smallKernel: Sgemm = (...args) => blockedSgemm(() => args[3] * args[4] * args[5] < 100_000)(...args);
    expect(probeSplitAlignment(smallKernel).rows).toBe(16);
    expect(probeSkinnyRowSplit(smallKernel, 16)).toBe(false);
  }, 120_000);

  it("finds an alignment for the library this machine loads", async () => {
    let blas: Awaited<ReturnType<typeof loadBlas>>;
    try {
      blas = await loadBlas();
    } catch (err) {
      if (process.env.KILN_NATIVE === "required") throw err;
      console.warn(`probeSplitAlignment on a real BLAS NOT RUN: ${(err as Error).message}`);
      return;
    }
    blas.setThreads(1);
    const found = probeSplitAlignment(blas.sgemm);
    expect(found.rows ?? found.cols).not.toBeNull();
    // The skinny probe says no to a cut inside the register blocks the wide probe found (where it found rows).
    if (found.rows !== null && found.rows > 16) expect(probeSkinnyRowSplit(blas.sgemm, 16)).toBe(false);
  });
});
